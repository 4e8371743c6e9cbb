"""A multi-node Ray cluster (slow, root): ``fedpriv simulate`` with ``simulation.ray_address``
on a head and two worker nodes that are separate network namespaces on one switch (the hosts
of test_deploy_netns); a worker node dies in round 2, the run goes on, and resumes on a
replacement node.

The head (no CPUs, so no client actor) and the ``fedpriv simulate`` driver are on host H,
one-CPU worker nodes on W1 and W2: Flower's pool holds one ClientApp actor per worker node,
and every message crosses a veth link between H and a worker. The ClientApp is fedpriv's
behind a mod that records the Ray node each message ran on and holds round 2's train messages
until released (:mod:`ray_cluster_support`). Afterwards no namespace, no process of the
cluster and no Ray address file of it is left.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from process_support import PATIENCE, netns_prefix
from ray_cluster_support import MARKER, ROOT, RayCluster, read_trace

from workflows.deploy.netns import NetnsNetwork, netns_unavailable
from workflows.deploy.processes import ProcessGroup, kill_pids, processes_with_env
from workflows.simulation import ray_address_file

UNAVAILABLE = netns_unavailable()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE)),
]

CLIENTS, ROUNDS, HOLD = 4, 4, 2
SETS = [f"data.num_clients={CLIENTS}", f"rounds={ROUNDS}", "train.local_steps=2",
        "simulation.client_cpus=1", "audit.attacks=[]"]  # fmt: skip
RAY_ADDRESS_FILE = ray_address_file()  # where `ray.init("auto")` looks from this process
ACTOR_LOST = ("ActorDiedError", "ActorUnavailableError", "RayActorError")


@pytest.fixture
def network() -> Iterator[NetnsNetwork]:
    """The switch and its hosts; afterwards none of them may be left."""
    with NetnsNetwork(netns_prefix()) as net:
        yield net
    assert net.leftovers() == []


@pytest.fixture
def home() -> Iterator[Path]:
    """A short directory for the cluster's temp dirs and logs (Ray's socket paths live in
    it), removed afterwards; no process carrying its marker may outlive the test, and no Ray
    address file may name the cluster."""
    before = RAY_ADDRESS_FILE.read_text() if RAY_ADDRESS_FILE.exists() else None
    path = Path(tempfile.mkdtemp(prefix="fpray", dir="/tmp"))
    try:
        yield path
        assert processes_with_env(MARKER, str(path)) == []
        assert (RAY_ADDRESS_FILE.read_text() if RAY_ADDRESS_FILE.exists() else None) == before
    finally:
        kill_pids(processes_with_env(MARKER, str(path)), signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


def _wait(found: Callable[[], Any], timeout: float, what: str, poll: float = 0.2) -> Any:
    """``found()`` once it is truthy; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := found()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(poll)
    return value


def _rows(run_dir: Path, sql: str) -> list[tuple]:
    if not (run_dir / "audit.sqlite").exists():
        return []
    with sqlite3.connect(f"file:{run_dir / 'audit.sqlite'}?mode=ro", uri=True) as con:
        return con.execute(sql).fetchall()


def _served(trace: list[dict], rounds: range) -> dict[str, set[int]]:
    """Node address → partitions whose train message it answered in ``rounds``."""
    out: dict[str, set[int]] = {}
    for t in trace:
        if t["phase"] == "end" and t["type"] == "train" and t["round"] in rounds:
            out.setdefault(t["ip"], set()).add(t["partition"])
    return out


def _outcomes(run_dir: Path, report: dict) -> dict[int, tuple[int, int]]:
    """Round → (accepted updates, recorded failures)."""
    ok = dict(_rows(run_dir, "SELECT round, COUNT(*) FROM updates WHERE status = 'ok' "
                             "GROUP BY round"))  # fmt: skip
    return {r: (ok.get(r, 0), sum(f["round"] == r for f in report["failures"]))
            for r in range(1, ROUNDS + 1)}


def _driver(cluster: RayCluster, name: str, trace: Path, hold: int, args: list[str]):  # noqa: ANN202
    return cluster.start_on_head(name, ["simulate", str(trace), str(hold), "simulate", *args])


@pytest.mark.timeout(1800)
def test_simulation_on_a_three_node_ray_cluster_survives_a_lost_worker(
    network: NetnsNetwork, home: Path
) -> None:
    head = network.add_host("head", "10.231.9.1/24")
    w1 = network.add_host("w1", "10.231.9.2/24")
    w2 = network.add_host("w2", "10.231.9.3/24")
    trace, resumed_trace, run_dir = home / "trace.jsonl", home / "resumed.jsonl", home / "run"
    with ProcessGroup() as group:
        cluster = RayCluster(group, home)
        address = cluster.start_head(head)
        cluster.add_worker("w1", w1)
        cluster.add_worker("w2", w2)
        nodes = {n["ip"]: n for n in cluster.wait_nodes(2)}
        assert sorted(nodes) == [head.address, w1.address, w2.address]
        # "auto" finds the cluster through its address file (fedpriv's pre-run check and Ray
        # alike); joining with a CPU count (Flower's init-args-num-cpus) is refused
        joined = cluster.run_on_head(["join", address], timeout=PATIENCE)
        said = json.loads(joined.stdout.splitlines()[-1]) if joined.returncode == 0 else {}
        assert said.get("auto") == address, joined.stderr[-3000:]
        assert said["num_cpus"].startswith("ValueError: When connecting to an existing "
                                           "cluster, num_cpus and num_gpus must not"), said
        sets = [*SETS, f"simulation.ray_address='{address}'"]
        driver = _driver(cluster, "driver", trace, HOLD, [
            str(ROOT / "configs" / "quickstart.toml"), "--out", str(run_dir), "--json",
            *[a for s in sets for a in ("--set", s)]])  # fmt: skip

        # round 2: both actors hold a train message; W2 dies with its message in flight
        def held() -> dict[str, int]:
            return {t["ip"]: t["partition"] for t in read_trace(trace)
                    if t["round"] == HOLD and t["phase"] == "begin" and t["type"] == "train"}

        in_flight = _wait(lambda: len(held()) == 2 and held(), 2 * PATIENCE, "round 2 held")
        killed = cluster.kill_node("w2")
        assert killed and driver.poll() is None
        Path(f"{trace}.release").touch()

        # the run goes on: round 3 completes without W2; then the driver is killed (a crash)
        _wait(lambda: _rows(run_dir, "SELECT 1 FROM rounds WHERE round = 3 AND status = "
                                     "'completed'"), PATIENCE, "round 3 completed")  # fmt: skip
        group.send_signal("driver", signal.SIGKILL)
        assert driver.wait(timeout=PATIENCE) == -signal.SIGKILL
        first = read_trace(trace)

        # a replacement node joins on W2's host; once Ray has marked the killed node dead (else
        # Flower would size its new pool by its CPU too, and the extra actor never starts),
        # the run resumes on the cluster
        cluster.add_worker("w2b", w2)
        renewed = {n["ip"]: n for n in cluster.wait_nodes(2, gone=(nodes[w2.address]["node_id"],))}
        resumed = _driver(cluster, "resumed", resumed_trace, 0, ["--resume", str(run_dir),
                                                                 "--json"])  # fmt: skip
        assert resumed.wait(timeout=2 * PATIENCE) == 0, cluster.log_tails(4000)
    assert network.pids() == []  # the group stopped every Ray process in every namespace

    # round 1: both worker nodes answered train messages; the head (no CPUs) none
    served = _served(first, range(1, 2))
    assert set(served) == {w1.address, w2.address}, served
    assert set().union(*served.values()) == set(range(CLIENTS))
    assert {t["node_id"] for t in first} <= {nodes[w1.address]["node_id"],
                                             nodes[w2.address]["node_id"]}  # fmt: skip
    # the actors imported the app from this checkout, through the PYTHONPATH Flower ships
    # (the Ray nodes run without one)
    assert {t["app_file"] for t in first} == {str(ROOT / "clients" / "client_app.py")}
    # nothing ran on W2 after it was killed; W1 answered its held message
    assert not [t for t in first if t["ip"] == w2.address and t["phase"] == "end"
                and t["round"] >= HOLD]  # fmt: skip
    assert in_flight[w1.address] in _served(first, range(HOLD, HOLD + 1))[w1.address]

    # every round closed with each client either accepted or recorded as failed; the message
    # W2 held is round 2's failure, and every failure is the lost Ray actor
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "completed" and report["rounds"] == ROUNDS
    outcomes = _outcomes(run_dir, report)
    assert all(sum(outcome) == CLIENTS for outcome in outcomes.values()), outcomes
    assert outcomes[1] == (CLIENTS, 0) and outcomes[HOLD][1] >= 1, outcomes
    assert in_flight[w2.address] in {f["client_id"] for f in report["failures"]
                                     if f["round"] == HOLD}  # fmt: skip
    for f in report["failures"]:
        assert f["kind"] == "exception" and f["message"].startswith(ACTOR_LOST), f

    # the resumed run: round 4 on W1 and the replacement node, every client accepted
    assert outcomes[ROUNDS] == (CLIENTS, 0), outcomes
    again = _served(read_trace(resumed_trace), range(ROUNDS, ROUNDS + 1))
    assert set(again) == {w1.address, w2.address}, again
    assert renewed[w2.address]["node_id"] != nodes[w2.address]["node_id"]
    print(f"(accepted, failed) per round: {outcomes}; failures: {report['failures']}")
