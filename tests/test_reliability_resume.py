"""A run stopped mid-way and resumed ends exactly where an uninterrupted run ends.

The fast tests drive the real ServerApp body on an in-process Grid and stop it by raising
when round 3's messages go out (round 3 is left begun, with its θ stored). The slow test kills
``fedpriv simulate`` with SIGKILL on Ray, reads the killed run with ``fedpriv report``, resumes
it with ``fedpriv simulate --resume`` and compares with an uninterrupted run of the same seed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from reliability_support import (
    QUICKSTART,
    Killed,
    LocalGrid,
    assert_same_outcome,
    faulty_client_app,
)

from fedpriv.audit import AuditStore, report_run
from fedpriv.errors import InputError
from strategies.server_run import run_federation
from workflows.config import load_config

ROUNDS = 4
# audit.attacks=[]: not about attacks (the default attacks one client a round)
SMALL = [f"rounds={ROUNDS}", "data.num_clients=3", "train.local_steps=2", "train.lr=1.0",
         "train.batch_size=16", "audit.attacks=[]"]  # fmt: skip
# A mixed federation: client 2 uses VMF, so its ledger replays another accountant path.
MIXED = [*SMALL, "mechanism.overrides=[{clients = [2], name = 'vmf', kappa = 500.0}]"]


def _run(cfg, run_dir, stop_at=None, resume=False):  # noqa: ANN001, ANN202
    grid = LocalGrid(faulty_client_app({}), cfg.data.num_clients, stop_at=stop_at)
    return run_federation(grid, cfg, run_dir, resume=resume)


def _snapshot(run_dir) -> dict:  # noqa: ANN001
    """Everything a resumed run must reproduce: per-round server metrics, every aggregate,
    every update and every tally (all but the ids and wall-clock times)."""
    with AuditStore.open(run_dir, readonly=True) as store:
        rounds = store.completed_rounds()
        tallies = store.query("SELECT * FROM tallies ORDER BY round, client_id")
        updates = list(store.iter_updates())
        return {
            "rounds": rounds,
            "metrics": store.query("SELECT round, accuracy, loss FROM rounds ORDER BY round"),
            "aggregates": [store.load_aggregate(r) for r in rounds],
            "globals": [store.load_global(r) for r in rounds],
            "updates": [(u.round, u.client_id, u.status, u.report,
                         store.load_update(u.update_id)) for u in updates],
            "tallies": tallies,
        }  # fmt: skip


def _assert_same(a: dict, b: dict) -> None:
    assert a["rounds"] == b["rounds"] == list(range(1, ROUNDS + 1))
    assert a["metrics"] == b["metrics"] and a["tallies"] == b["tallies"]
    for key in ("aggregates", "globals"):
        for x, y in zip(a[key], b[key], strict=True):
            assert list(x) == list(y)
            for name in x:
                np.testing.assert_array_equal(x[name], y[name])
    for ua, ub in zip(a["updates"], b["updates"], strict=True):
        assert ua[:4] == ub[:4]
        for name in ua[4]:
            np.testing.assert_array_equal(ua[4][name], ub[4][name])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    cfg = load_config(QUICKSTART, MIXED)
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    report = _run(cfg, run_dir)
    return cfg, run_dir, report


def test_stopped_and_resumed_run_equals_the_uninterrupted_run(reference, tmp_path):
    cfg, ref_dir, ref_report = reference
    run_dir = tmp_path / "run"
    with pytest.raises(Killed):
        _run(cfg, run_dir, stop_at=3)
    with AuditStore.open(run_dir, readonly=True) as store:
        assert store.completed_rounds() == [1, 2] and store.incomplete_rounds() == [3]
        assert store.run_info()["status"] == "failed"
    stopped = report_run(run_dir)  # what `fedpriv report` prints for the stopped run
    assert (stopped["completed_rounds"], stopped["incomplete_rounds"]) == ([1, 2], [3])
    assert stopped["accuracy"] == ref_report["accuracy"][:2] and stopped["integrity"]["ok"]
    report = _run(cfg, run_dir, resume=True)
    assert report["status"] == "completed" and report["incomplete_rounds"] == []
    assert report["accuracy"] == ref_report["accuracy"]
    epsilons = [c["epsilon"] for c in report["clients"]]
    assert epsilons == [c["epsilon"] for c in ref_report["clients"]]
    _assert_same(_snapshot(ref_dir), _snapshot(run_dir))


def test_resuming_a_finished_run_trains_nothing(reference):
    cfg, ref_dir, ref_report = reference
    before = _snapshot(ref_dir)
    report = run_federation(None, cfg, ref_dir, resume=True)  # no grid: nothing to train
    assert report["accuracy"] == ref_report["accuracy"] and report["status"] == "completed"
    _assert_same(before, _snapshot(ref_dir))


def test_resume_of_a_run_still_going_is_refused(reference):
    cfg, ref_dir, _ = reference
    with AuditStore.open(ref_dir) as live:  # as the process driving the run holds it
        live.hold_writer_lock()
        with pytest.raises(InputError, match="another process is writing"):
            run_federation(None, cfg, ref_dir, resume=True)
    assert run_federation(None, cfg, ref_dir, resume=True)["status"] == "completed"


def test_resume_refuses_another_configuration(reference):
    cfg, ref_dir, _ = reference
    other = load_config(QUICKSTART, [*MIXED, "train.lr=0.5"])
    with pytest.raises(InputError, match="--resume"):
        run_federation(None, other, ref_dir, resume=True)


# ---------------------------------------------------------------- end to end, on Ray


def _fedpriv(*args: str, **kwargs) -> subprocess.CompletedProcess:  # noqa: ANN003
    return subprocess.run([sys.executable, "-m", "fedpriv", *args], capture_output=True,
                          text=True, timeout=600, **kwargs)


def _completed(run_dir) -> int:  # noqa: ANN001
    try:
        with AuditStore.open(run_dir, readonly=True, check=False) as store:
            return len(store.completed_rounds())
    except InputError:  # not created yet
        return 0


def _kill_after_first_round(cmd: list[str], run_dir) -> None:  # noqa: ANN001
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while _completed(run_dir) < 1:
            assert proc.poll() is None and time.monotonic() < deadline, "no round completed"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        try:  # Ray's own processes share the session: end them too
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_sigkilled_simulate_reports_then_resumes_to_the_uninterrupted_result(tmp_path):
    sets = [a for s in [*SMALL, "rounds=10"] for a in ("--set", s)]
    config = str(QUICKSTART)
    full = _fedpriv("simulate", config, *sets, "--out", str(tmp_path / "full"), "--json")
    assert full.returncode == 0, full.stderr[-2000:]
    killed = tmp_path / "killed"
    _kill_after_first_round(
        [sys.executable, "-m", "fedpriv", "simulate", config, *sets, "--out", str(killed)], killed
    )
    report = _fedpriv("report", str(killed), "--json")
    assert report.returncode == 0, report.stderr
    partial = json.loads(report.stdout)
    assert partial["status"] == "running" and 1 <= partial["rounds"] < 10
    assert partial["completed_rounds"] == list(range(1, partial["rounds"] + 1))
    resumed = _fedpriv("simulate", "--resume", str(killed), "--json")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    verified = _fedpriv("verify", str(killed))  # killed, discarded, resumed: still chained
    assert verified.returncode == 0, verified.stdout[-2000:]
    assert_same_outcome(json.loads(resumed.stdout), json.loads(full.stdout), killed,
                        tmp_path / "full", 10)
