"""A real Flower deployment: one SuperLink and N SuperNodes, on 127.0.0.1 or on given hosts.

:class:`Federation` starts ``flower-superlink`` (insecure, or TLS with a throwaway CA whose
certificate names the SuperLink's address, optionally with SuperNode authentication), waits
for its ``/health`` endpoint, registers the SuperNodes' public keys, starts
``flower-supernode`` processes dialling the SuperLink's address with distinct runtime ports
and ``--node-config``, waits until all are online, submits runs with ``flwr run --stream``
and stops everything when its ``with`` block ends. By default everything runs on this
machine's 127.0.0.1; with :class:`~workflows.deploy.hosts.Host` arguments the SuperLink, each
SuperNode and the ``flwr`` CLI run on hosts of their own (network namespaces, see
:mod:`workflows.deploy.netns`), so they talk over real links.

The federation's directory holds ``logs/``, ``certs/`` and ``keys/``, and one ``FLWR_HOME``
(also the working directory) per component, as on separate machines: ``superlink/`` (SQLite
state, installed FABs), ``cli/`` (``config.toml``, the run config) and ``supernode-<i>/``.
Every process carries ``FEDPRIV_FEDERATION=<directory>`` in its environment, which marks it
for the final sweep.

The commands follow Flower 1.41 (one HTTP API per SuperLink, ``$FLWR_HOME/config.toml``
connections, ``flwr supernode register``); see docs/deployment.md.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import tomli_w

from fedpriv.errors import InputError
from fedpriv.seeding import REPRODUCIBLE_NOISE_ENV
from fedpriv.validate import check_positive
from workflows.deploy.flwr_cli import FlwrCli, RunOutcome, flower_bin, flower_env
from workflows.deploy.hosts import LOCALHOST, Host
from workflows.deploy.ports import LOOPBACK, free_ports
from workflows.deploy.processes import ProcessGroup, kill_processes_with_env
from workflows.deploy.tls import TlsFiles, write_supernode_key, write_tls_files

__all__ = ["FEDERATION_MARKER", "Federation", "NodeValue"]

#: Environment variable that marks every process of a federation (value: its directory).
FEDERATION_MARKER = "FEDPRIV_FEDERATION"
# GET URL (trusting the CA file, if given); exit status 0 when the answer is 2xx
_HEALTH_PROBE = (
    "import ssl, sys, urllib.request\n"
    "ca = sys.argv[2] if len(sys.argv) > 2 else None\n"
    "context = ssl.create_default_context(cafile=ca) if ca else None\n"
    "urllib.request.urlopen(sys.argv[1], timeout=2, context=context).close()\n"
)

_RUN_ID = re.compile(r"Successfully started run (\d+)")
NodeValue = str | int | float | bool


def _toml_value(value: NodeValue) -> str:
    """A scalar as a TOML literal (how ``--node-config`` values are parsed)."""
    return tomli_w.dumps({"v": value}).removeprefix("v = ").strip()


class Federation:
    """SuperLink + ``supernodes`` SuperNodes, as a context manager.

    Parameters
    ----------
    home
        The federation's directory; created if missing (see the module docstring).
    supernodes
        Number of SuperNodes N ≥ 1; node i gets ``partition-id=i num-partitions=N``.
    tls
        Serve over TLS with a throwaway CA (``home/certs``) instead of ``--insecure``; the
        server certificate names the SuperLink's address only (and ``localhost`` for
        127.0.0.1).
    auth
        SuperNode authentication (requires ``tls``): one ECDSA key per node in ``home/keys``,
        registered with ``flwr supernode register`` before the node starts.
    node_configs
        Extra ``--node-config`` entries per node (index i for node i; missing means none).
    superlink_host
        Where the SuperLink runs; it listens on this host's address, which SuperNodes and
        the CLI dial.
    node_hosts
        Where each SuperNode runs (one per node; empty: all on ``superlink_host``). A
        SuperNode's runtime API stays on its host's 127.0.0.1.
    cli_host
        Where the ``flwr`` CLI runs (the operator's machine); health checks run there too.
    connect_timeout
        Seconds a SuperNode keeps retrying an unreachable SuperLink before it gives up and
        exits (``--max-wait-time``); None: it retries for ever (Flower's default).
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
        superlink_host: Host = LOCALHOST,
        node_hosts: Sequence[Host] = (),
        cli_host: Host = LOCALHOST,
        connect_timeout: float | None = None,
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
        if node_hosts and len(node_hosts) != supernodes:
            raise InputError("node_hosts", node_hosts, f"{supernodes} hosts, one per SuperNode")
        if connect_timeout is not None:
            check_positive("connect_timeout", connect_timeout)
        self.home = home.resolve()
        self.supernodes = supernodes
        self.tls, self.auth = tls, auth
        self.node_configs = list(node_configs)
        self.superlink_host = superlink_host
        self.node_hosts = list(node_hosts) or [superlink_host] * supernodes
        self.connect_timeout = connect_timeout
        self.startup_timeout = startup_timeout
        self.group = ProcessGroup(stop_timeout)
        self.flwr = FlwrCli(self.home / "cli", self.env(self.home / "cli"), cli_host)
        self.certs: TlsFiles | None = None
        self.keys: list[Path] = []
        self.port = 0
        self._logs: list[TextIO] = []

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Federation:
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
        for sub in ("logs", "cli"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        self.port, *node_ports = free_ports(1 + self.supernodes)
        if self.tls:
            self.certs = write_tls_files(self.home / "certs", self.cert_names)
        self.flwr.write_connection(self.address, self.ca_cert)
        superlink_home = self.home / "superlink"
        self._spawn("superlink", self.superlink_host, superlink_home, self._superlink_argv())
        self._wait_healthy()
        for i, node_port in enumerate(node_ports):
            key = self._register_key(i) if self.auth else None
            self.start_supernode(i, node_port, ca=self.ca_cert, key=key)
        self.wait_online(self.supernodes)

    @property
    def address(self) -> str:
        """``host:port`` of the SuperLink, as SuperNodes and the CLI dial it."""
        return f"{self.superlink_host.address}:{self.port}"

    @property
    def cert_names(self) -> tuple[str, ...]:
        """The names the server certificate carries: the SuperLink's address (and
        ``localhost`` when that is 127.0.0.1)."""
        address = self.superlink_host.address
        return ("localhost", address) if address == LOOPBACK else (address,)

    def env(self, flwr_home: Path) -> dict[str, str]:
        """The environment of a process of this federation whose ``FLWR_HOME`` is
        ``flwr_home``: Flower offline (:func:`flower_env`) and the federation's marker, without
        the simulator's switch to server-derivable noise (a deployment's clients keep their
        noise secret unless a node's ``--node-config`` opts in:
        :func:`fedpriv.seeding.client_noise_seed`)."""
        env = {**flower_env(flwr_home), FEDERATION_MARKER: str(self.home)}
        env.pop(REPRODUCIBLE_NOISE_ENV, None)
        return env

    @property
    def ca_cert(self) -> Path | None:
        """The throwaway CA certificate (None for an insecure federation)."""
        return self.certs.ca_cert if self.certs else None

    def close(self) -> None:
        """Stop every process of the federation; sweep up any stray one by its marker."""
        self.group.stop_all()
        kill_processes_with_env(FEDERATION_MARKER, str(self.home))
        for log in self._logs:
            log.close()
        self._logs.clear()

    # ------------------------------------------------------------------ processes

    def _spawn(
        self, name: str, host: Host, flwr_home: Path, argv: Sequence[str]
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` on ``host`` as child ``name``, in ``flwr_home`` (its FLWR_HOME)."""
        flwr_home.mkdir(parents=True, exist_ok=True)
        log = (self.home / "logs" / f"{name}.log").open("ab")
        self._logs.append(log)
        return self.group.start(
            name, host.command(argv), env=self.env(flwr_home), cwd=flwr_home, stdout=log
        )

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last ``lines`` lines of process ``name``'s log."""
        path = self.home / "logs" / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def exit_report(self, name: str) -> str:
        """Why process ``name`` exited, from its log: Flower's last exit report (the lines from
        ``Exit Code: N`` to the link to its documentation), else the log's last 20 lines."""
        log = self.log_tail(name, 10_000).splitlines()
        starts = [i for i, line in enumerate(log) if "Exit Code:" in line]
        if not starts:
            return "\n".join(log[-20:])
        report = log[starts[-1] :]
        ends = [i for i, line in enumerate(report) if "For more information" in line]
        return "\n".join(report[: ends[0] + 1] if ends else report[:20])

    def _superlink_argv(self) -> list[str]:
        argv = [
            flower_bin("flower-superlink"),
            "--host", self.superlink_host.address,
            "--port", str(self.port),
            "--database", str(self.home / "superlink" / "state.db"),
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
        self,
        index: int,
        port: int,
        *,
        ca: Path | None,
        key: Path | None,
        superlink: str | None = None,
    ) -> list[str]:
        """``flower-supernode`` command line for node ``index`` with runtime port ``port``.

        In a TLS federation ``ca`` is the trusted root (None: the system's trust store);
        ``key`` is the authentication private key (None: no authentication); ``superlink`` is
        the address to dial, ``host:port`` (None: :attr:`address`).
        """
        argv = [
            flower_bin("flower-supernode"),
            "--superlink", superlink or self.address,
            "--host", LOOPBACK,
            "--port", str(port),
            "--node-config", self._node_config(index),
        ]  # fmt: skip
        if self.connect_timeout is not None:
            argv += ["--max-wait-time", str(self.connect_timeout)]
        if not self.tls:
            argv.append("--insecure")
        elif ca is not None:
            argv += ["--root-certificates", str(ca)]
        if key is not None:
            argv += ["--auth-supernode-private-key", str(key)]
        return argv

    def start_supernode(
        self,
        index: int,
        port: int,
        *,
        ca: Path | None,
        key: Path | None,
        host: Host | None = None,
        superlink: str | None = None,
    ) -> subprocess.Popen[Any]:
        """Start SuperNode ``index`` (named ``supernode-<index>``, FLWR_HOME
        ``home/supernode-<index>``) on ``host`` (None: node ``index``'s host, the SuperLink's
        for an index beyond the federation's); see :meth:`supernode_argv`."""
        if host is None:
            in_range = index < len(self.node_hosts)
            host = self.node_hosts[index] if in_range else self.superlink_host
        name = f"supernode-{index}"
        argv = self.supernode_argv(index, port, ca=ca, key=key, superlink=superlink)
        return self._spawn(name, host, self.home / name, argv)

    def kill_supernode(self, index: int, signum: int = signal.SIGKILL) -> None:
        """Send ``signum`` to SuperNode ``index`` and everything it started (failure drills)."""
        self.group.send_signal(f"supernode-{index}", signum)

    def _node_config(self, index: int) -> str:
        extra = self.node_configs[index] if index < len(self.node_configs) else {}
        items = {"partition-id": index, "num-partitions": self.supernodes, **extra}
        return " ".join(f"{k}={_toml_value(v)}" for k, v in items.items())

    def _register_key(self, index: int) -> Path:
        private = self.register_key(f"supernode_{index}")
        self.keys.append(private)
        return private

    def register_key(self, name: str) -> Path:
        """Make a SuperNode key pair ``home/keys/NAME`` (and ``.pub``) and register it with
        ``flwr supernode register``; return the private key's path."""
        private, public = write_supernode_key(self.home / "keys" / name)
        self.flwr.register(public)
        return private

    def online_count(self) -> int:
        """How many SuperNodes the SuperLink currently lists as online."""
        return sum(node.get("status") == "online" for node in self.flwr.nodes())

    # ------------------------------------------------------------------ waiting

    def _check_running(self, name: str) -> None:
        proc = self.group.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(
                f"{name} exited with code {proc.returncode}:\n{self.exit_report(name)}"
            )

    def _wait_healthy(self) -> None:
        """Poll ``GET /health`` from the CLI's host until the SuperLink answers."""
        url = f"{'https' if self.certs else 'http'}://{self.address}/health"
        probe = [sys.executable, "-c", _HEALTH_PROBE, url]
        if self.ca_cert is not None:
            probe.append(str(self.ca_cert))
        argv = self.flwr.host.command(probe)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            self._check_running("superlink")
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
            if done.returncode == 0:
                return
            time.sleep(0.5)
        raise TimeoutError(f"SuperLink not healthy at {url} after {self.startup_timeout} s")

    def wait_online(self, count: int) -> None:
        """Wait until ``count`` SuperNodes are online; fail early, naming it and quoting its
        log, if one of ours exits (a SuperNode gives up after ``connect_timeout``)."""
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            for name in self.group.procs:
                self._check_running(name)
            if self.online_count() >= count:
                return
            time.sleep(0.5)
        waiting = "\n".join(
            f"{name}: {self.log_tail(name, 1)}"
            for name in self.group.procs if name.startswith("supernode-")
        )  # fmt: skip
        raise TimeoutError(
            f"fewer than {count} SuperNodes online after {self.startup_timeout} s; the last "
            f"line of each SuperNode's log:\n{waiting}"
        )

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
            "flwr-run", argv, env=self.flwr.env, cwd=self.flwr.home, stdout=subprocess.PIPE
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
