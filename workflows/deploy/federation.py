"""A real Flower deployment on one machine: one SuperLink and N SuperNodes on 127.0.0.1.

:class:`LocalFederation` starts ``flower-superlink`` (insecure, or TLS with a throwaway CA,
optionally with SuperNode authentication), waits for its ``/health`` endpoint, registers the
SuperNodes' public keys, starts ``flower-supernode`` processes with distinct runtime ports and
``--node-config``, waits until all are online, submits runs with ``flwr run --stream`` and
stops everything when its ``with`` block ends. Flower's own state (``config.toml``, the
SQLite database, installed FABs, logs, keys, certificates) lives in a private ``FLWR_HOME``,
which also marks every process of the federation for the final sweep.

The commands follow Flower 1.41 (one HTTP API per SuperLink, ``$FLWR_HOME/config.toml``
connections, ``flwr supernode register``); see docs/deployment.md.
"""

from __future__ import annotations

import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import tomli_w

from fedpriv.errors import InputError
from workflows.deploy.flwr_cli import FlwrCli, RunOutcome, flower_bin, flower_env
from workflows.deploy.ports import LOOPBACK, free_ports
from workflows.deploy.processes import ProcessGroup, kill_pids, processes_with_env
from workflows.deploy.tls import TlsFiles, write_supernode_key, write_tls_files

__all__ = ["LocalFederation", "NodeValue"]

_RUN_ID = re.compile(r"Successfully started run (\d+)")
NodeValue = str | int | float | bool


def _toml_value(value: NodeValue) -> str:
    """A scalar as a TOML literal (how ``--node-config`` values are parsed)."""
    return tomli_w.dumps({"v": value}).removeprefix("v = ").strip()


class LocalFederation:
    """SuperLink + ``supernodes`` SuperNodes on 127.0.0.1, as a context manager.

    Parameters
    ----------
    home
        Private ``FLWR_HOME``; created if missing. Logs go to ``home/logs``.
    supernodes
        Number of SuperNodes N ≥ 1; node i gets ``partition-id=i num-partitions=N``.
    tls
        Serve over TLS with a throwaway CA (``home/certs``) instead of ``--insecure``.
    auth
        SuperNode authentication (requires ``tls``): one ECDSA key per node in ``home/keys``,
        registered with ``flwr supernode register`` before the node starts.
    node_configs
        Extra ``--node-config`` entries per node (index i for node i; missing means none).
    startup_timeout
        Seconds to wait for the SuperLink to be healthy and for the SuperNodes to be online.
    stop_timeout
        Seconds between SIGTERM and SIGKILL when stopping.
    """

    def __init__(
        self,
        home: Path,
        supernodes: int,
        *,
        tls: bool = False,
        auth: bool = False,
        node_configs: Sequence[Mapping[str, NodeValue]] = (),
        startup_timeout: float = 120.0,
        stop_timeout: float = 10.0,
    ) -> None:
        if supernodes < 1:
            raise InputError("supernodes", supernodes, "an integer >= 1")
        if auth and not tls:
            raise InputError(
                "auth",
                auth,
                "false unless tls is true (Flower refuses auth over insecure connections)",
            )
        self.home = home.resolve()
        self.supernodes = supernodes
        self.tls, self.auth = tls, auth
        self.node_configs = list(node_configs)
        self.startup_timeout = startup_timeout
        self.group = ProcessGroup(stop_timeout)
        self.env = flower_env(self.home)
        self.flwr = FlwrCli(self.home, self.env)
        self.certs: TlsFiles | None = None
        self.keys: list[Path] = []
        self.port = 0
        self._logs: list[TextIO] = []

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalFederation:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the SuperLink and the SuperNodes; return once all nodes are online."""
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        self.port, *node_ports = free_ports(1 + self.supernodes)
        if self.tls:
            self.certs = write_tls_files(self.home / "certs")
        self.flwr.write_connection(f"{LOOPBACK}:{self.port}", self.ca_cert)
        self._spawn("superlink", self._superlink_argv())
        self._wait_healthy()
        for i, node_port in enumerate(node_ports):
            key = self._register_key(i) if self.auth else None
            self.start_supernode(i, node_port, ca=self.ca_cert, key=key)
        self.wait_online(self.supernodes)

    @property
    def ca_cert(self) -> Path | None:
        """The throwaway CA certificate (None for an insecure federation)."""
        return self.certs.ca_cert if self.certs else None

    def close(self) -> None:
        """Stop every process of the federation; sweep up any stray one by its FLWR_HOME."""
        self.group.stop_all()
        kill_pids(processes_with_env("FLWR_HOME", str(self.home)), signal.SIGKILL)
        for log in self._logs:
            log.close()
        self._logs.clear()

    def stray_processes(self) -> list[int]:
        """Processes still alive that were started for this federation (should be none)."""
        return processes_with_env("FLWR_HOME", str(self.home))

    # ------------------------------------------------------------------ processes

    def _spawn(self, name: str, argv: Sequence[str]) -> subprocess.Popen[Any]:
        log = (self.home / "logs" / f"{name}.log").open("ab")
        self._logs.append(log)
        return self.group.start(name, argv, env=self.env, cwd=self.home, stdout=log)

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last ``lines`` lines of process ``name``'s log."""
        path = self.home / "logs" / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _superlink_argv(self) -> list[str]:
        argv = [
            flower_bin("flower-superlink"),
            "--host", LOOPBACK,
            "--port", str(self.port),
            "--database", str(self.home / "state.db"),
            "--disable-runtime-dependency-installation",
        ]  # fmt: skip
        if self.certs is None:
            return [*argv, "--insecure"]
        argv += [
            "--ssl-ca-certfile", str(self.certs.ca_cert),
            "--ssl-certfile", str(self.certs.server_cert),
            "--ssl-keyfile", str(self.certs.server_key),
        ]  # fmt: skip
        return [*argv, "--enable-supernode-auth"] if self.auth else argv

    def supernode_argv(
        self, index: int, port: int, *, ca: Path | None, key: Path | None
    ) -> list[str]:
        """``flower-supernode`` command line for node ``index`` with runtime port ``port``.

        In a TLS federation ``ca`` is the trusted root (None: the system's trust store);
        ``key`` is the authentication private key (None: no authentication).
        """
        argv = [
            flower_bin("flower-supernode"),
            "--superlink", f"{LOOPBACK}:{self.port}",
            "--host", LOOPBACK,
            "--port", str(port),
            "--node-config", self._node_config(index),
        ]  # fmt: skip
        if not self.tls:
            argv.append("--insecure")
        elif ca is not None:
            argv += ["--root-certificates", str(ca)]
        if key is not None:
            argv += ["--auth-supernode-private-key", str(key)]
        return argv

    def start_supernode(
        self, index: int, port: int, *, ca: Path | None, key: Path | None
    ) -> subprocess.Popen[Any]:
        """Start SuperNode ``index`` (named ``supernode-<index>``); see :meth:`supernode_argv`."""
        return self._spawn(f"supernode-{index}", self.supernode_argv(index, port, ca=ca, key=key))

    def kill_supernode(self, index: int, signum: int = signal.SIGKILL) -> None:
        """Send ``signum`` to SuperNode ``index`` and everything it started (failure drills)."""
        self.group.send_signal(f"supernode-{index}", signum)

    def _node_config(self, index: int) -> str:
        extra = self.node_configs[index] if index < len(self.node_configs) else {}
        items = {"partition-id": index, "num-partitions": self.supernodes, **extra}
        return " ".join(f"{k}={_toml_value(v)}" for k, v in items.items())

    def _register_key(self, index: int) -> Path:
        private, public = write_supernode_key(self.home / "keys" / f"supernode_{index}")
        self.flwr.register(public)
        self.keys.append(private)
        return private

    def online_count(self) -> int:
        """How many SuperNodes the SuperLink currently lists as online."""
        return sum(node.get("status") == "online" for node in self.flwr.nodes())

    # ------------------------------------------------------------------ waiting

    def _check_running(self, name: str) -> None:
        proc = self.group.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(
                f"{name} exited with code {proc.returncode}; its log ends with:\n"
                + self.log_tail(name)
            )

    def _wait_healthy(self) -> None:
        scheme = "https" if self.certs else "http"
        url = f"{scheme}://{LOOPBACK}:{self.port}/health"
        context = ssl.create_default_context(cafile=self.certs.ca_cert) if self.certs else None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            self._check_running("superlink")
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        raise TimeoutError(f"SuperLink not healthy at {url} after {self.startup_timeout} s")

    def wait_online(self, count: int) -> None:
        """Wait until ``count`` SuperNodes are online; fail early if one of ours exits."""
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            for name in self.group.procs:
                self._check_running(name)
            if self.online_count() >= count:
                return
            time.sleep(0.5)
        raise TimeoutError(f"fewer than {count} SuperNodes online after {self.startup_timeout} s")

    # ------------------------------------------------------------------ runs

    def submit(
        self,
        app_dir: Path,
        run_config: Mapping[str, NodeValue],
        *,
        on_line: Callable[[str], None] | None = None,
        echo: TextIO | None = sys.stderr,
        timeout: float | None = None,
    ) -> RunOutcome:
        """``flwr run APP_DIR <connection> --stream --run-config <file>``; wait until it ends.

        Every streamed line is echoed to ``echo`` (progress) and passed to ``on_line``. After
        ``timeout`` seconds the run is stopped (``flwr stop``) and :class:`TimeoutError` raised.
        """
        argv = self.flwr.run_argv(app_dir, dict(run_config))
        proc = self.group.start(
            "flwr-run", argv, env=self.env, cwd=self.home, stdout=subprocess.PIPE
        )
        run_ids: list[int] = []
        expired = threading.Event()
        timer = threading.Timer(timeout or 0.0, self._abort, (run_ids, expired))
        if timeout is not None:
            timer.start()
        try:
            for line in proc.stdout or ():
                if not run_ids and (match := _RUN_ID.search(line)):
                    run_ids.append(int(match.group(1)))
                if echo is not None:
                    echo.write(line)
                if on_line is not None:
                    on_line(line)
            returncode = proc.wait()
        finally:
            timer.cancel()
        if expired.is_set():
            raise TimeoutError(f"run {run_ids} stopped after the {timeout} s timeout")
        run_id = run_ids[0] if run_ids else None
        return RunOutcome(run_id, returncode, self.flwr.run_status(run_id))

    def _abort(self, run_ids: list[int], expired: threading.Event) -> None:
        expired.set()
        if run_ids:
            self.flwr.stop(run_ids[0])
        self.group.stop(["flwr-run"])
