"""The audit record's hash chain (issue 40): every write enters it, in write order, with the
documented encoding; an edit, a deletion, an insertion outside the audit or an edit of the
chain itself is found, first in write order first."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3

import numpy as np
import pytest
from store_support import make_store

from fedpriv.audit import AuditStore, verify
from fedpriv.audit.chain import CHAINED, GENESIS, chain_breaks, entry_digest


def _sql(run_dir, sql, *params):  # noqa: ANN001, ANN202
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    with conn:
        conn.execute(sql, params)
    conn.close()


def _chain(run_dir) -> list[dict]:  # noqa: ANN001
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute("SELECT * FROM chain ORDER BY seq")]
    conn.close()
    return rows


def _errors(run_dir) -> list[str]:  # noqa: ANN001
    return [p.message for p in verify(run_dir) if p.severity == "error"]


def test_every_write_enters_the_chain_in_write_order(tmp_path):
    run_dir = make_store(tmp_path / "run")
    entries = _chain(run_dir)
    run_id = json.loads(entries[0]["key_json"])
    assert [(e["tbl"], json.loads(e["key_json"])) for e in entries] == [
        ("runs", run_id), ("rounds", [1]), ("tensors", [1]), ("globals", [1]), ("tensors", [2]),
        ("updates", [1]), ("rounds", [1]), ("runs", run_id),
    ]
    assert verify(run_dir) == []


def test_the_encoding_is_the_documented_one(tmp_path):
    """Recomputed here from the rows with hashlib and json alone (docs/audit-store.md)."""
    run_dir = make_store(tmp_path / "run")
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    conn.row_factory = sqlite3.Row
    update = dict(conn.execute("SELECT * FROM updates").fetchone())
    run = dict(conn.execute("SELECT * FROM runs").fetchone())
    conn.close()
    entries = _chain(run_dir)
    head = GENESIS
    for entry in entries:
        head = hashlib.sha256(bytes.fromhex(head) + bytes.fromhex(entry["digest"])).hexdigest()
        assert entry["head"] == head
    for table, key, row, entry in (("updates", [1], update, entries[5]),
                                   ("runs", [run["run_id"]], run, entries[-1])):
        text = json.dumps([table, key, row], sort_keys=True, separators=(",", ":"))
        assert entry["digest"] == hashlib.sha256(text.encode()).hexdigest()
    assert isinstance(run["finished"], float) and repr(run["finished"]) in text


def test_writes_in_place_and_discarded_rounds_are_chained(tmp_path):
    run_dir = make_store(tmp_path / "run")
    with AuditStore.open(run_dir) as store:
        store.mark_status("running")
        store.begin_round(2)
        store.write_global(2, {"w": np.zeros(8, np.float32)})
        store.write_tally(2, 0, {"epsilon": 1.0})
        store.write_tally(2, 0, {"mbp_estimate": 0.5})  # a later estimate: a new version
        store.write_memory(2, 0, "sketch", {"x": np.arange(3)})
        store.record_failure(2, "timeout", "late", client_id=1)
        assert verify(run_dir) == [p for p in verify(run_dir) if p.severity == "warning"]
        store.discard_incomplete_rounds()
        store.mark_status("completed")
    entries = _chain(run_dir)
    assert [e["tbl"] for e in entries[-15:]] == [
        "runs", "rounds", "tensors", "globals", "tallies", "tallies", "memory", "failures",
        "tensors", "globals", "tallies", "memory", "failures", "rounds", "runs",
    ]  # written (the tally twice), then deleted children first
    assert all(e["round"] == 2 for e in entries[-14:-1])
    assert verify(run_dir) == []


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        ("UPDATE updates SET status = 'rejected'", "updates row {'update_id': 1}, round 1, "
         "client 0: differs from its last chained version"),
        ("DELETE FROM globals", "globals row {'round': 1}, round 1: missing"),
        ("INSERT INTO failures (round, kind, message, created) VALUES (1, 'timeout', 'x', 0)",
         "failures row {'failure_id': 1}, round 1: not in the chain"),
        ("UPDATE chain SET digest = head WHERE seq = 3", "chain entry 3: does not follow"),
        ("DELETE FROM chain WHERE seq = 5", "chain entry 6: does not follow"),
    ],
)
def test_edits_are_found(tmp_path, edit, found):
    run_dir = make_store(tmp_path / "run")
    _sql(run_dir, edit)
    assert _errors(run_dir)[0].startswith(found)


def test_breaks_come_in_write_order(tmp_path):
    run_dir = make_store(tmp_path / "run")
    _sql(run_dir, "UPDATE runs SET seed = 1")  # the runs row's last version is the last entry
    _sql(run_dir, "UPDATE updates SET error = 'x'")
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    conn.row_factory = sqlite3.Row
    breaks, heads = chain_breaks(conn)
    conn.close()
    assert [b.table for b in breaks] == ["updates", "runs"] and len(heads) == 8


def _round_of_writes(store: AuditStore) -> None:
    """One round's writes as the audit makes them, a tally written twice and a memory row
    replaced (rows written again while their first entry may be pending)."""
    store.write_global(1, {"w": np.zeros(4, np.float32)})
    for cid in range(7):
        store.write_memory(1, cid, "sketch", {"s": np.full(3, cid, np.float64)})
        store.write_update(1, cid, {"w": np.ones(4, np.float32)} if cid == 2 else None,
                           {"mechanism": "gaussian", "node_id": 10 + cid})
        store.write_ground_truth(1, cid, [cid, cid + 1])
        store.write_tally(1, cid, {"epsilon": 0.5 * cid, "verification": {"status": "ok"}})
        if cid % 3 == 0:
            store.record_failure(1, "inconsistent", f"client {cid}", client_id=cid)
            store.write_tally(1, cid, {"epsilon": math.inf})
            store.write_memory(1, cid, "sketch", {"s": np.zeros(2)})


@pytest.mark.parametrize("batched", [False, True])
def test_a_batch_chains_exactly_as_one_write_at_a_time(tmp_path, monkeypatch, batched):
    """Inside ``store.batch()`` the entries are written when the batch ends (one read-back
    per table, one ``executemany``): the same entries, digests and heads as written one by
    one, and a record that verifies."""
    import secrets
    import time

    monkeypatch.setattr(time, "time", lambda: 1.0e9)  # rows identical in both runs
    monkeypatch.setattr(secrets, "token_hex", lambda n: "ab" * n)
    heads = {}
    for mode in (False, batched):
        run_dir = tmp_path / f"run-{mode}-{len(heads)}"
        with AuditStore.create(run_dir, {"rounds": 1}, seed=0, run_id="r") as store:
            store.begin_round(1)
            if mode:
                with store.batch():
                    _round_of_writes(store)
            else:
                _round_of_writes(store)
            store.complete_round(1, {"accuracy": 0.5})
        heads[len(heads)] = [(e["tbl"], e["key_json"], e["digest"], e["head"])
                             for e in _chain(run_dir)]
        assert _errors(run_dir) == []
    assert heads[0] == heads[1]
    assert len(heads[0]) == 2 + 2 + 7 * 4 + 3 * 3 + 1 + 1  # runs, round, θ+tensor, …


def test_a_batch_reads_its_rows_back_through_their_keys_not_a_scan(tmp_path):
    """A batch's read-back looks each key up in its table's key index: a scan (what
    ``(a, b) IN (VALUES …)`` gives) would read every stored round's rows for every few hundred
    keys — a round's chain costing more with every round (0.16 → 0.30 ms per reply over 4
    rounds of 10,000 replies, measured for issue 37)."""
    plans: list[str] = []
    with AuditStore.create(tmp_path / "run", {"rounds": 2}, seed=0) as store:
        for rnd in (1, 2):
            store.begin_round(rnd)
            selects: list[str] = []
            store._conn.set_trace_callback(selects.append)
            with store.batch():
                for cid in range(3):
                    store.write_memory(rnd, cid, "sketch", {"s": np.zeros(3)})
                    store.write_update(rnd, cid, None, {"mechanism": "gaussian"})
                    store.write_ground_truth(rnd, cid, [cid])
                    store.write_tally(rnd, cid, {"epsilon": 0.5})
            store._conn.set_trace_callback(None)
            store.complete_round(rnd)
            plans += [row["detail"] for sql in selects if sql.lstrip().startswith("SELECT")
                      for row in store._conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    scans = [d for d in plans if d.split()[:2] in (["SCAN", t] for t in [*CHAINED, "t"])]
    assert scans == []  # (the chain's own last entry is read by a reverse scan, LIMIT 1)
    for table in ("memory", "tallies", "ground_truth"):  # the composite keys, by their index
        assert any(f"USING INDEX sqlite_autoindex_{table}_1" in d for d in plans), plans


@pytest.mark.parametrize(("kind", "state"), [
    ("sketch", bytes(range(256)) * 8), ("canaries", b""), ('"state":""', b"\x00"),
    ('x","state":"', b'"state":""'), ("s", "text, not a BLOB"),
])  # fmt: skip
def test_a_memory_rows_digest_is_of_its_documented_text(kind, state):
    """A memory row's state, hashed apart from the rest of its text, gives the digest of the
    documented text, whatever its kind says (recomputed with hashlib and json alone)."""
    key, row = [3, 4, kind], {"round": 3, "client_id": 4, "kind": kind, "state": state}
    stored = state.hex() if isinstance(state, bytes) else state
    text = json.dumps(["memory", key, {**row, "state": stored}], sort_keys=True,
                      separators=(",", ":"))
    assert entry_digest("memory", key, row) == hashlib.sha256(text.encode()).hexdigest()
