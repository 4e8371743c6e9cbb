"""A writer killed with SIGKILL loses nothing committed; readers read while a writer writes.

The writer is a separate Python process using the public API; the arrays it writes are a
function of (round, client), so the test recomputes them and compares what it reads back.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from process_support import PATIENCE

from fedpriv.audit import AuditStore, build_report, verify

CLIENTS = 3
WRITER = """
import sys
import numpy as np
from fedpriv.audit import AuditStore

def arrays(rnd, client):
    rng = np.random.default_rng([rnd, client + 1])
    return {"w": rng.normal(size=(40, 50)).astype(np.float32), "b": rng.normal(size=40)}

clients = int(sys.argv[4])
store = AuditStore.create(sys.argv[1], {"clients": clients}, seed=0)
print("ready", flush=True)
for rnd in range(1, int(sys.argv[2]) + 1):
    store.begin_round(rnd)
    store.write_global(rnd, arrays(rnd, -1))
    for client in range(clients):
        store.write_update(rnd, client, arrays(rnd, client), {"mechanism": "gaussian"})
        store.write_ground_truth(rnd, client, [rnd, client], {"images": np.zeros((2, 16, 16))})
        store.write_tally(rnd, client, {"epsilon": 0.5 * rnd})
        store.write_attack(rnd, client, {"attack": "iga", "ssim": 0.1}, arrays(rnd, client))
    store.complete_round(rnd, {"accuracy": rnd / 100})
    print(rnd, flush=True)
if sys.argv[3] == "hold":  # keep a write transaction open, as a writer mid-commit does
    store.begin_round(99)
    store.write_update(99, 0, arrays(99, 0), {})
    import sqlite3
    lock = sqlite3.connect(sys.argv[1] + "/audit.sqlite", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    lock.execute("INSERT INTO rounds (round, started, status) VALUES (100, 0, 'running')")
    print("holding", flush=True)
    sys.stdin.read()  # hold until killed, or until the test ends
"""


def _arrays(rnd, client):
    rng = np.random.default_rng([rnd, client + 1])
    return {"w": rng.normal(size=(40, 50)).astype(np.float32), "b": rng.normal(size=40)}


def _start(run_dir, rounds, mode):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(run_dir), str(rounds), mode, str(CLIENTS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=PATIENCE)
    proc.stdout.close()
    proc.stdin.close()


def _assert_round_intact(store, rnd):
    for name, array in _arrays(rnd, -1).items():
        np.testing.assert_array_equal(store.load_global(rnd)[name], array)
    updates = list(store.iter_updates(rounds=[rnd]))
    assert [u.client_id for u in updates] == list(range(CLIENTS))
    for update in updates:
        loaded = store.load_update(update.update_id)
        for name, array in _arrays(rnd, update.client_id).items():
            np.testing.assert_array_equal(loaded[name], array)
    for table in ("tallies", "attacks", "ground_truth"):
        rows = store.query(f"SELECT client_id FROM {table} WHERE round = ?", (rnd,))
        assert sorted(r["client_id"] for r in rows) == list(range(CLIENTS)), table


def _check_after_kill(run_dir):
    with AuditStore.open(run_dir) as store:
        done, partial = store.completed_rounds(), store.incomplete_rounds()
        assert done == list(range(1, len(done) + 1)) and done
        assert partial in ([], [len(done) + 1])
        assert [p for p in verify(run_dir) if p.severity == "error"] == []
        for rnd in done:
            _assert_round_intact(store, rnd)
        report = build_report(store)
        assert report["rounds"] == len(done) and report["incomplete_rounds"] == partial
        assert report["accuracy"] == [r / 100 for r in done]
        assert [c["rounds_participated"] for c in report["clients"]] == [len(done)] * CLIENTS
        assert store.discard_incomplete_rounds() == partial
        assert [p for p in verify(run_dir) if p.kind == "incomplete-round"] == []
        store.begin_round(len(done) + 1)  # a resume starts cleanly
    return partial


def test_sigkill_at_random_moments_keeps_every_completed_round(tmp_path):
    rng = np.random.default_rng(20261115)
    incomplete_seen = 0
    for kill in range(5):
        run_dir = tmp_path / f"run{kill}"
        proc = _start(run_dir, rounds=1000, mode="loop")
        try:
            assert proc.stdout.readline().strip() == "ready"
            assert proc.stdout.readline().strip() == "1"  # at least one round completed
            time.sleep(rng.uniform(0.0, 0.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=PATIENCE)
        finally:
            _stop(proc)
        assert proc.returncode == -signal.SIGKILL
        incomplete_seen += bool(_check_after_kill(run_dir))
    print(f"{incomplete_seen} of 5 kills left a partial round")


def test_reader_reads_completed_rounds_while_writer_holds_the_database(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, rounds=2, mode="hold")
    try:
        lines = [proc.stdout.readline().strip() for _ in range(4)]
        assert lines == ["ready", "1", "2", "holding"]
        with AuditStore.open(run_dir, readonly=True) as reader:
            reader.query("PRAGMA busy_timeout = 0")  # a wait for the writer's lock would fail
            assert reader.completed_rounds() == [1, 2]
            assert reader.incomplete_rounds() == [99]  # round 100 is not committed yet
            for rnd in (1, 2):
                _assert_round_intact(reader, rnd)
            report = build_report(reader, verify(run_dir))
        assert report["rounds"] == 2 and report["incomplete_rounds"] == [99]
        assert report["integrity"]["ok"]
        assert proc.poll() is None  # the writer still holds its transaction
    finally:
        _stop(proc)


@pytest.mark.parametrize("readonly", [True, False])
def test_store_of_a_killed_writer_opens(tmp_path, readonly):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, rounds=2, mode="hold")
    try:
        assert [proc.stdout.readline().strip() for _ in range(4)][-1] == "holding"
    finally:
        _stop(proc)
    with AuditStore.open(run_dir, readonly=readonly) as store:
        assert store.completed_rounds() == [1, 2]
        assert store.incomplete_rounds() == [99]
