"""A Ray cluster whose nodes are network namespaces, and a ClientApp that says where it ran.

* :class:`RayCluster` — ``ray start --head`` on one :class:`~workflows.deploy.hosts.Host`,
  ``ray start --address HEAD`` on others, each bound to its host's address with
  ``--node-ip-address``, its own ``--temp-dir`` under the test's directory (so no address file
  lands in ``/tmp/ray``, where a later ``ray.init()`` on the machine would find it), usage
  stats off and a small object store. Every process runs in the foreground (``--block``) in a
  :class:`~workflows.deploy.processes.ProcessGroup` and carries ``FEDPRIV_RAY_CLUSTER=<dir>``
  in its environment, down to the ClientApp actors (Ray's workers inherit the raylet's), so
  :func:`~workflows.deploy.processes.processes_with_env` finds whatever is left. Never
  ``ray stop``: it kills every Ray process of the machine, other users' clusters included.
* :func:`traced_client_app` — fedpriv's ClientApp functions (and its adversary mod) behind a
  client mod that appends one JSON line per message to a file: partition id, round, message
  type, and the Ray node id, node address and pid of the actor that handled it
  (``ray.get_runtime_context()``). The node's namespaces share this machine's file system, so
  every actor writes to the same file.
* ``python tests/ray_cluster_driver.py`` (run on the head's host) runs ``fedpriv simulate``
  with that ClientApp, or waits for the cluster's nodes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from process_support import PATIENCE

from workflows.deploy.hosts import Host
from workflows.deploy.processes import ProcessGroup, kill_pids

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DRIVER = Path(__file__).resolve().parent / "ray_cluster_driver.py"
MARKER = "FEDPRIV_RAY_CLUSTER"
GCS_PORT = 6379
OBJECT_STORE_BYTES = 80 * 2**20  # Ray's floor is 75 MiB; the runs move a few MB


def ray_env(home: Path) -> dict[str, str]:
    """The environment of every process of a cluster living under ``home``: no
    ``PYTHONPATH``, so the actors find the app only through what Flower ships them."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    return {
        **env, MARKER: str(home), "RAY_TMPDIR": str(home),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0",
        "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "OMP_NUM_THREADS": "1",
        "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
        "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    }  # fmt: skip


class RayCluster:
    """A head and worker nodes on namespace hosts, started in ``group``, logging to ``home``.

    ``home`` must be short: Ray's Unix socket paths live under it and must stay within the
    107 bytes ``sun_path`` allows.
    """

    def __init__(self, group: ProcessGroup, home: Path) -> None:
        self.group = group
        self.home = home
        self.env = ray_env(home)
        self.hosts: dict[str, Host] = {}
        self.address = ""

    def _start(self, name: str, host: Host, args: list[str], temp_dir: Path) -> None:
        argv = [str(BIN / "ray"), "start", "--block", "--node-ip-address", host.address,
                "--temp-dir", str(temp_dir), "--disable-usage-stats",
                "--object-store-memory", str(OBJECT_STORE_BYTES), *args]  # fmt: skip
        with (self.home / f"{name}.log").open("ab") as log:
            self.group.start(name, host.command(argv), env=self.env, cwd=self.home, stdout=log)
        self.hosts[name] = host

    def start_head(self, host: Host, num_cpus: int = 0) -> str:
        """``ray start --head`` on ``host``, no dashboard, ``num_cpus`` CPUs (0: the head
        runs no client actor); returns the cluster's address. Its temp dir is
        ``HOME/ray``, so its address file is where ``ray.init("auto")`` looks with
        ``RAY_TMPDIR=HOME`` (the clusters' environment), not in the machine's ``/tmp/ray``."""
        self._start("head", host, ["--head", "--port", str(GCS_PORT), "--num-cpus",
                                   str(num_cpus), "--include-dashboard=false"],
                    self.home / "ray")  # fmt: skip
        self.address = f"{host.address}:{GCS_PORT}"
        return self.address

    def add_worker(self, name: str, host: Host, num_cpus: int = 1) -> None:
        """``ray start --address HEAD`` on ``host`` with ``num_cpus`` CPUs."""
        self._start(name, host, ["--address", self.address, "--num-cpus", str(num_cpus)],
                    self.home / name)

    def start_on_head(self, name: str, args: list[str]) -> subprocess.Popen:
        """Start ``python tests/ray_cluster_driver.py ARGS`` on the head's host as child
        ``name`` of the group, its output in ``HOME/NAME.log``."""
        argv = self.hosts["head"].command([sys.executable, str(DRIVER), *args])
        with (self.home / f"{name}.log").open("ab") as log:
            return self.group.start(name, argv, env=self._driver_env(), cwd=self.home,
                                    stdout=log)  # fmt: skip

    def _driver_env(self) -> dict[str, str]:
        """The drivers import this checkout (its root first on ``sys.path``)."""
        return {**self.env, "PYTHONPATH": str(ROOT)}

    def run_on_head(self, args: list[str], *, timeout: float) -> subprocess.CompletedProcess:
        """``python tests/ray_cluster_driver.py ARGS`` on the head's host (waits for it)."""
        argv = self.hosts["head"].command([sys.executable, str(DRIVER), *args])
        return subprocess.run(argv, env=self._driver_env(), cwd=self.home, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip

    def wait_nodes(self, count: int, gone: tuple[str, ...] = (), timeout: float = PATIENCE
                   ) -> list[dict[str, Any]]:
        """The alive nodes once exactly ``count`` of them offer CPUs and none of the node ids
        ``gone`` is alive any more (Ray marks a killed node dead only after missed
        heartbeats), polled by one driver on the head with a deadline; raises
        ``TimeoutError`` quoting the logs."""
        done = self.run_on_head(["nodes", self.address, str(count), str(timeout), *gone],
                                timeout=timeout + PATIENCE)  # fmt: skip
        if done.returncode != 0:
            raise TimeoutError(f"{count} Ray worker nodes not up: {done.stderr[-3000:]}\n"
                               + self.log_tails())
        return json.loads(done.stdout.splitlines()[-1])

    def kill_node(self, name: str) -> list[int]:
        """SIGKILL every process in node ``name``'s namespace (raylet, agents, actors), as a
        machine that loses power; returns their pids."""
        netns = self.hosts[name].netns
        assert netns is not None
        listed = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                                check=True).stdout  # fmt: skip
        pids = [int(p) for p in listed.split()]
        kill_pids(pids, signal.SIGKILL)
        return pids

    def log_tails(self, chars: int = 1500) -> str:
        """The end of each node's ``ray start`` log."""
        return "\n".join(f"--- {name}.log\n{(self.home / f'{name}.log').read_text()[-chars:]}"
                         for name in self.hosts)


# -- inside the cluster ------------------------------------------------------------------------


def alive_nodes(address: str, count: int, timeout: float, gone: tuple[str, ...] = ()
                ) -> list[dict[str, Any]]:
    """Connect to ``address`` and poll ``ray.nodes()`` until exactly ``count`` alive nodes
    offer CPUs and no node of ``gone`` is alive, or ``timeout`` seconds pass
    (``TimeoutError``); each node as id, address and CPUs."""
    import ray

    ray.init(address=address, log_to_driver=False, logging_level="WARNING")
    try:
        deadline = time.monotonic() + timeout
        while True:
            nodes = [{"node_id": n["NodeID"], "ip": n["NodeManagerAddress"],
                      "cpus": n["Resources"].get("CPU", 0)}
                     for n in ray.nodes() if n["Alive"]]  # fmt: skip
            if (sum(n["cpus"] > 0 for n in nodes) == count
                    and not {n["node_id"] for n in nodes} & set(gone)):
                return nodes
            if time.monotonic() > deadline:
                raise TimeoutError(f"after {timeout} s only these nodes are alive: {nodes}")
            time.sleep(0.5)
    finally:
        ray.shutdown()


HOLD_LIMIT = 1200.0  # seconds a held message waits for its release before going on


def join_checks(address: str) -> dict[str, str]:
    """How this host joins the cluster at ``address``: the GCS address that fedpriv's pre-run
    check and ``ray.init("auto")`` resolve "auto" to, and what ``ray.init(address,
    num_cpus=1)`` says (Flower's ``init-args-num-cpus`` does this): exception type and
    message, or "accepted"."""
    import ray

    from workflows.simulation import check_ray_address

    check_ray_address("auto")
    ray.init(address="auto", log_to_driver=False, logging_level="WARNING")
    auto = ray.get_runtime_context().gcs_address
    ray.shutdown()
    try:
        ray.init(address=address, num_cpus=1, log_to_driver=False, logging_level="WARNING")
    except Exception as exc:  # noqa: BLE001 - reported, not handled
        return {"auto": auto, "num_cpus": f"{type(exc).__name__}: {exc}"}
    ray.shutdown()
    return {"auto": auto, "num_cpus": "accepted"}


HOLD_LIMIT = 1200.0  # seconds a held message waits for its release before going on


def refused_num_cpus(address: str) -> str:
    """What ``ray.init(address, num_cpus=1)`` says when joining a running cluster (Flower's
    ``init-args-num-cpus`` does this): the exception's type and message."""
    import ray

    try:
        ray.init(address=address, num_cpus=1, log_to_driver=False, logging_level="WARNING")
    except Exception as exc:  # noqa: BLE001 - reported, not handled
        return f"{type(exc).__name__}: {exc}"
    ray.shutdown()
    return "accepted"


def trace_mod(path: str, hold_round: int = 0) -> Callable:
    """A client mod appending ``{"phase", "partition", "round", "type", "node_id", "ip",
    "pid", "app_file"}`` to ``path`` when a message arrives ("begin") and when its reply
    leaves ("end"); ``app_file`` is where the actor imported ``clients.client_app`` from.

    Train messages of round ``hold_round`` (0: none) wait after "begin" until the file
    ``PATH.release`` exists, so that a test can act while they are in flight.
    """

    def write(phase: str, msg: Any, context: Any) -> dict[str, Any]:
        import ray

        import clients.client_app

        ctx = ray.get_runtime_context()
        config = msg.content["config"] if "config" in msg.content else {}
        entry = {
            "phase": phase, "partition": int(context.node_config["partition-id"]),
            "round": int(config.get("server-round", 0)), "type": msg.metadata.message_type,
            "node_id": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(), "app_file": clients.client_app.__file__,
        }  # fmt: skip
        with open(path, "a") as out:  # one short O_APPEND write per line
            out.write(json.dumps(entry) + "\n")
        return entry

    def mod(msg: Any, context: Any, call_next: Callable) -> Any:
        entry = write("begin", msg, context)
        if entry["round"] == hold_round and entry["type"] == "train":
            deadline = time.monotonic() + HOLD_LIMIT
            while not os.path.exists(f"{path}.release") and time.monotonic() < deadline:
                time.sleep(0.1)
        reply = call_next(msg, context)
        write("end", msg, context)
        return reply

    return mod


def traced_client_app(path: str, hold_round: int = 0) -> Any:
    """fedpriv's ClientApp (its adversary mod, ``train`` and ``evaluate``) behind
    :func:`trace_mod`."""
    from flwr.clientapp import ClientApp

    from clients.adversaries import adversary_mod
    from clients.client_app import evaluate, train

    app = ClientApp(mods=[trace_mod(path, hold_round), adversary_mod])
    app.train()(train)
    app.evaluate()(evaluate)
    return app


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The trace's lines so far (a line still being written is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
