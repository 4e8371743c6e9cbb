"""Batched audit writes: one transaction per reply, one sync pass per round, nothing lost.

Counts the ``fsync`` calls and the ``PRAGMA synchronous`` level of every commit through a
proxy of the store's connection; the kill -9 promise itself is ``test_audit_durability.py``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import fedpriv.atomic
import fedpriv.audit.store
from fedpriv.atomic import sync_files
from fedpriv.audit import AuditStore, verify


class _Recorder:
    """The store's connection, recording each COMMIT with the synchronous level in force."""

    def __init__(self, conn):
        self._conn, self.level, self.commits = conn, "NORMAL", []

    def execute(self, sql, *args):
        text = sql.strip().upper()
        if text.startswith("PRAGMA SYNCHRONOUS"):
            self.level = text.split("=")[1].strip()
        elif text == "COMMIT":
            self.commits.append(self.level)
        return self._conn.execute(sql, *args)

    def executemany(self, sql, rows):
        return self._conn.executemany(sql, rows)

    def close(self):
        self._conn.close()


@pytest.fixture
def store(tmp_path):
    with AuditStore.create(tmp_path / "run", {}, seed=0) as s:
        s._conn = _Recorder(s._conn)
        yield s


@pytest.fixture
def fsyncs(monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    return calls


def _reply(store, rnd, client):
    with store.batch():
        store.write_update(rnd, client, [np.full(3, client, np.float32)], {"mechanism": "none"})
        store.write_ground_truth(rnd, client, [client], {"images": np.zeros((1, 4, 4))})
        store.write_tally(rnd, client, {"epsilon": 1.0})


def test_a_running_round_costs_no_fsync_until_it_completes(store, fsyncs, monkeypatch):
    synced = []
    monkeypatch.setattr(fedpriv.audit.store, "sync_files",
                        lambda files: (synced.extend(files), sync_files(files)))
    store.begin_round(1)
    store.write_global(1, [np.zeros(3)])
    before = len(store._conn.commits)
    for client in range(4):
        _reply(store, 1, client)
    assert len(fsyncs) == 1 and synced == []  # one: the round's new directory; no file, no row
    assert store._conn.commits[before:] == ["NORMAL"] * 4  # one transaction per reply
    store.complete_round(1)
    paths = {r["path"] for r in store.query("SELECT path FROM tensors WHERE round = 1")}
    assert {p.relative_to(store.run_dir).as_posix() for p in synced} == paths  # all 9 files
    assert store._conn.commits[-1] == "FULL"  # the completion's commit syncs the WAL
    assert verify(store.run_dir) == []


def test_writes_to_a_completed_round_and_the_status_are_durable_at_once(store, fsyncs):
    store.begin_round(1)
    store.write_global(1, [np.zeros(3)])
    store.complete_round(1)
    fsyncs.clear()
    store.write_attack(1, 0, {"attack": "iga"}, {"images": np.zeros((1, 4, 4))})
    assert len(fsyncs) == 2  # the file's data and its directory entry
    store.write_tally(1, 0, {"mbp_estimate": 0.5})
    store.mark_status("completed")
    assert store._conn.commits[-3:] == ["FULL"] * 3
    with pytest.raises(ValueError, match="cannot join a batch"), store.batch():
        store.write_tally(1, 1, {"epsilon": 2.0})
    assert store.query("SELECT client_id FROM tallies") == [{"client_id": 0}]


def test_a_failed_batch_leaves_no_row_and_no_file(store):
    store.begin_round(1)
    with pytest.raises(RuntimeError, match="boom"), store.batch():
        _reply(store, 1, 1)  # a batch inside a batch is part of it
        store.write_update(1, 0, [np.ones(3)], {})
        store.write_ground_truth(1, 0, [0], {"images": np.zeros((1, 4, 4))})
        raise RuntimeError("boom")
    for table in ("updates", "ground_truth", "tallies", "tensors"):
        assert store.query(f"SELECT * FROM {table}") == [], table
    assert list((store.run_dir / "tensors" / "r000001").iterdir()) == []
    _reply(store, 1, 0)  # the store is usable afterwards
    store.complete_round(1)
    assert verify(store.run_dir) == []


@pytest.mark.parametrize("syncfs", [True, False])
def test_sync_files_flushes_every_file_and_directory(tmp_path, fsyncs, monkeypatch, syncfs):
    if not syncfs:
        monkeypatch.setattr(fedpriv.atomic, "_SYNCFS", None)
    files = []
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        for i in range(3):
            path = tmp_path / sub / f"f{i}"
            fedpriv.atomic.atomic_write_bytes(path, b"x" * 100, durable=False)
            files.append(path)
    assert fsyncs == []
    files[-1].unlink()  # a file removed since (a rolled-back batch) is skipped
    sync_files(files)
    uses_syncfs = syncfs and fedpriv.atomic._SYNCFS is not None
    assert len(fsyncs) == 2 + (0 if uses_syncfs else 5)  # directories (+ each file without)
    assert [p.read_bytes() for p in files[:-1]] == [b"x" * 100] * 5
