"""A batch of replies written at once (``AuditStore.write_replies``, the store stage's path,
issue 37) leaves the database and the tensor files exactly as the per-row writers do one reply
after another — every table row by row, the ids, the chain's entries and heads — and the
memory bundle laid out by hand is the bytes ``zipfile`` writes."""

from __future__ import annotations

import io
import itertools
import sqlite3
import time
import zipfile
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from reliability_support import QUICKSTART

import fedpriv.audit.store
from fedpriv.audit import AuditStore, chain, verify
from fedpriv.audit.reply_rows import UPDATE_COLUMNS, ReplyRows, update_values
from fedpriv.audit.schema import SCHEMA_SQL
from fedpriv.audit.tensors import _npy, decode_state, encode_state
from workflows.config import load_config


def _verification(status: str, p_value: float) -> dict:
    return {"status": status, "reason": "gaussian-norm: ‖u‖₂ = 117 fits σC = 1", "p_value": p_value,
            "alpha": 4e-06, "parts": [{"test": "settings", "status": status, "p_value": 1.0,
                                       "reason": "as sent"}], "label": "declared"}


def _tally(cid: int, status: str) -> dict:
    return {"epsilon": 6.5 + cid, "delta": 1e-05, "accountant": "tightest", "route": "pld",
            "optimal_order": None, "releases": np.int64(2), "mbp_bound": float("inf"),
            "log_capacity_round": np.float64(116.8), "pac_robust_confidence": 0.0,
            "epsilon_central": float("nan"), "guarantee": "declared", "unit": "record",
            "epsilon_observed": {"value": 9.5, "rounds": [1], "ratio": np.float32(1.5)},
            "verification": _verification(status, 0.5 / (cid + 1)), "epsilon_budget": None}


def _declared(cid: int, **extra: object) -> dict:
    return {"report": {"partition-id": cid, "lr": 4.0, "mechanism-params": '{"clip": 1.0}'},
            "node_id": 2**63 + cid, "num_examples": 2, "local_steps": 1, "lr": 4.0,
            "batch_size": 16.0, "sample_rate": 1.0, "mechanism": "gaussian",
            "mechanism_params": {"clip": 1.0, "noise_multiplier": np.float64(1.0)},
            "formal_guarantee": True, **extra}


def _replies() -> list[ReplyRows]:
    """A mixed batch: consistent (sketch), inconsistent with a failure and canary memory,
    undeclared, a kept update with its true batch, an attacked one (true batch without a kept
    update), one whose oracle named no record, and a tally with only some keys; the same
    each call."""
    rng = np.random.default_rng(7)
    sketch = {"sketch": rng.normal(size=16)}
    canaries = {"scores": rng.normal(size=(3, 2)), "formal": np.array([np.inf])}
    update = {"w": rng.normal(size=(4, 3)).astype(np.float32)}
    truth = {"images": rng.random((2, 4, 4)), "labels": np.array([3, 5])}
    return [
        ReplyRows(0, _declared(0), _tally(0, "consistent"), memory={"sketch": sketch}),
        ReplyRows(1, _declared(1, status="inconsistent", error="noise too small\nsee p"),
                  _tally(1, "inconsistent"), memory={"canaries": canaries},
                  failure=("inconsistent", "update inconsistent: noise too small (p = 0)")),
        ReplyRows(2, {"node_id": 9, "num_examples": 3, "formal_guarantee": False,
                      "pseudo_gradient": True, "status": "undeclared"},
                  {"verification": _verification("undeclared", 0.0)}),
        ReplyRows(3, _declared(3, local_steps=3), _tally(3, "consistent"), update,
                  {"sketch": sketch, "canaries": canaries}, truth=([np.int64(11), 42], truth)),
        ReplyRows(4, _declared(4), _tally(4, "consistent"), memory={"sketch": sketch},
                  truth=([7], {"images": rng.random((1, 4, 4))})),
        ReplyRows(5, _declared(5), {"epsilon": 1.0, "verification": None}, truth=([], None)),
        ReplyRows(6, _declared(6, status="inconsistent", error="settings"), _tally(6, "x"),
                  failure=("inconsistent", "reply inconsistent with what the server knows")),
    ]


def _one_by_one(store: AuditStore, rnd: int, replies: list[ReplyRows]) -> None:
    """The per-row writers, one reply after another, as the store stage called them."""
    for reply in replies:
        cid = reply.client_id
        for kind, state in reply.memory.items():
            store.write_memory(rnd, cid, kind, state)
        if reply.failure is not None:
            store.record_failure(rnd, *reply.failure, client_id=cid,
                                 node_id=reply.update.get("node_id"))
        store.write_update(rnd, cid, reply.arrays, reply.update)
        if reply.truth is not None:
            store.write_ground_truth(rnd, cid, *reply.truth)
        store.write_tally(rnd, cid, reply.tally)


def _run(run_dir: Path, write, *, batch: bool) -> Path:  # noqa: ANN001
    """A run whose round 2 holds rows written before the batch (a failure, an update, a
    tally the batch rewrites, still pending in the chain) and then the batch, by ``write``."""
    with AuditStore.create(run_dir, load_config(QUICKSTART, []).to_dict(), seed=0,
                           run_id="r") as store:
        store.begin_round(1)
        store.write_update(1, 0, None, _declared(0))
        store.complete_round(1, {"accuracy": 0.5})
        store.begin_round(2)
        with store.batch() if batch else nullcontext():
            store.record_failure(2, "timeout", "no reply", client_id=9, node_id=19)
            store.write_update(2, 9, None, {"node_id": 19, "status": "failed", "error": "x"})
            store.write_tally(2, 4, {"epsilon": 0.5, "details": {"early": True}})
            write(store, 2, _replies())
        store.complete_round(2, {"accuracy": 0.6})
        store.mark_status("completed")
    return run_dir


def _contents(run_dir: Path) -> dict:
    """Every table row by row (in rowid order) and every tensor file's bytes."""
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    out = {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
    conn.close()
    out["files"] = {p.relative_to(run_dir).as_posix(): p.read_bytes()
                    for p in sorted((run_dir / "tensors").rglob("*.npz"))}
    return out


@pytest.mark.parametrize("batch", [True, False])
def test_a_batch_of_replies_is_stored_as_the_per_row_writers_store_it(tmp_path, monkeypatch,
                                                                        batch):
    """Row by row, every table (chain included: the same entries, digests and heads) and
    every tensor file; inside the round's batch and alone (``write_replies`` its own)."""
    counter = itertools.count()
    monkeypatch.setattr(time, "time", lambda: 1.7e9)
    monkeypatch.setattr(fedpriv.audit.store.secrets, "token_hex", lambda n: f"{next(counter):08x}")
    one = _contents(_run(tmp_path / "one", _one_by_one, batch=batch))
    counter = itertools.count()
    batched = _contents(_run(tmp_path / "batched", AuditStore.write_replies, batch=batch))
    assert batched.keys() == one.keys()
    for table in one:
        assert batched[table] == one[table], table
    assert len(one["memory"]) == 5 and len(one["failures"]) == 3 and len(one["files"]) == 3
    assert verify(tmp_path / "batched") == []
    with AuditStore.open(tmp_path / "batched", readonly=True) as store:
        memory = {(c, k): s for r, c, k, s in store.iter_memory() if r == 2}
        assert np.array_equal(memory[(3, "canaries")]["formal"], [np.inf])


def test_a_client_twice_in_a_batch_leaves_nothing(tmp_path):
    """The second ``updates`` row of a client is refused: no row and no file of the batch."""
    run_dir = tmp_path / "run"
    with AuditStore.create(run_dir, load_config(QUICKSTART, []).to_dict(), seed=0) as store:
        store.begin_round(1)
        before = _contents(run_dir)
        replies = _replies()
        with pytest.raises(sqlite3.IntegrityError):
            store.write_replies(1, [*replies, replies[3]])
    assert _contents(run_dir) == before


def test_a_failed_write_of_replies_inside_a_batch_leaves_nothing_of_it(tmp_path):
    """Inside the round's batch a caller that catches ``write_replies``' error and carries on
    commits none of that call's rows or files (a savepoint), only the rest of the batch, all
    chained: ``verify`` finds nothing wrong."""
    run_dir = tmp_path / "run"
    with AuditStore.create(run_dir, load_config(QUICKSTART, []).to_dict(), seed=0) as store:
        store.begin_round(1)
        replies = _replies()
        with store.batch():
            store.write_tally(1, 3, {"epsilon": 0.5})  # pending, rewritten by the failed call
            with pytest.raises(sqlite3.IntegrityError):
                store.write_replies(1, [replies[0], replies[3], replies[3]])
            store.write_replies(1, [replies[1]])
        store.complete_round(1, {"accuracy": 0.5})
    assert verify(run_dir) == []
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    assert conn.execute("SELECT client_id FROM updates").fetchall() == [(1,)]
    assert conn.execute("SELECT client_id, kind FROM memory").fetchall() == [(1, "canaries")]
    assert conn.execute("SELECT client_id, epsilon FROM tallies ORDER BY client_id").fetchall() \
        == [(1, 7.5), (3, 0.5)]
    assert conn.execute("SELECT COUNT(*) FROM tensors").fetchone() == (0,)
    conn.close()
    assert not list((run_dir / "tensors").rglob("*.npz"))


def test_an_update_row_binds_every_column_the_schema_has():
    """``UPDATE_COLUMNS`` (derived from ``UPDATE_FIELDS``) is the ``updates`` table's columns
    but its id, so no key of a reply's meta is dropped; a key the fields lack is refused,
    named."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(SCHEMA_SQL)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(updates)")]
    assert sorted(UPDATE_COLUMNS) == sorted(columns[1:]) and columns[0] == "update_id"
    assert len(set(UPDATE_COLUMNS)) == len(UPDATE_COLUMNS)
    with pytest.raises(ValueError, match="unknown update meta keys \\['learning_rate'\\]"):
        update_values({"lr": 0.5, "learning_rate": 0.5})


def _zipfile_bundle(arrays: dict) -> bytes:
    """The bundle as ``zipfile`` writes it: each ``.npy`` member whole, ZipInfo's stamp."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as bundle:
        for name, value in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(value), allow_pickle=False)
            bundle.writestr(zipfile.ZipInfo(f"{name}.npy"), member.getvalue())
    return buffer.getvalue()


@pytest.mark.parametrize("arrays", [
    {},
    {"sketch": np.linspace(-3.0, 3.0, 256)},
    {"scalar": np.float32(3.0), "transposed": np.arange(12).reshape(3, 4).T,
     "empty": np.zeros((0, 3)), "naïve": np.array([np.inf, np.nan]),
     "fortran": np.asfortranarray(np.arange(30.0).reshape(3, 5, 2)),
     "strided": np.arange(24.0).reshape(4, 6)[:, ::2], "flags": np.array([True, False]),
     "big-endian": np.arange(5, dtype=">i4"), "zero-d": np.array(7),
     "row": np.ones((1, 5), order="F"), "complex": np.array([[1 + 2j]])},
])
def test_a_memory_bundle_is_the_bytes_zipfile_writes(arrays):
    data = encode_state(arrays)
    assert data == _zipfile_bundle(arrays)
    back = decode_state(data, Path("db"), "row")
    assert list(back) == list(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == np.asarray(array).dtype
        assert np.array_equal(back[name], array, equal_nan=array.dtype.kind == "f")


def test_a_memory_bundle_refuses_objects():
    with pytest.raises(ValueError, match="allow_pickle"):
        encode_state({"o": np.array([object()])})


@pytest.mark.parametrize("array", [
    np.zeros(3), np.arange(12).reshape(3, 4).T, np.ones((2, 3, 4), order="F"), np.array(5.0),
    np.zeros((0, 7), np.float32), np.arange(6, dtype=">u2"), np.array(["ab", "c"]),
    np.zeros(2, [("a", "<f4"), ("b", "<i8", (2,))]), np.random.default_rng(0).normal(size=97),
    np.zeros(1, [(f"field{i}", "<f4") for i in range(3000)]),  # a header over 64 KiB: 2.0
])
@pytest.mark.filterwarnings("ignore:Stored array in format 2.0")
def test_a_member_is_the_bytes_numpy_saves(array):
    """The ``.npy`` header built from dtype, shape and order (no stand-in array) and the data
    are what ``np.save`` writes, for each dtype, shape, order and header format."""
    saved = io.BytesIO()
    np.save(saved, array, allow_pickle=False)
    assert _npy(array) == saved.getvalue()


def test_a_memory_bundle_of_too_many_arrays_is_refused():
    """Over 65,535 members zipfile writes zip64 fields this layout has not: a clear error,
    not a struct.error."""
    with pytest.raises(ValueError, match="65536 arrays: too many for a memory row"):
        encode_state({f"a{i}": np.zeros(1) for i in range(65536)})


def test_the_rows_a_batch_knows_are_chained_as_the_database_holds_them(tmp_path, monkeypatch):
    """The rows ``write_replies`` chains from what it inserted (not read back) have the
    digests of the rows read back, bit for bit; a tally upserted over a standing row, whose
    other columns the batch does not know, is read back; the record verifies."""
    known, read_back = [], []
    append_many = chain.append_many

    def checked(conn: sqlite3.Connection, entries: list) -> None:
        for table, key, row in entries:
            (read_back if row is None else known).append((table, key))
            if row is not None:
                stored = chain._rows(conn, table, [key])[key]
                assert chain.canonical(table, key, row) == chain.canonical(table, key, stored)
        append_many(conn, entries)

    monkeypatch.setattr(chain, "append_many", checked)
    replies = _replies()
    replies[0] = replace(replies[0], tally={**replies[0].tally, "pac_accuracy": np.float32(0.1),
                                            "log_capacity_round": -0.0, "releases": True})
    run_dir = _run(tmp_path / "run", lambda store, rnd, _: store.write_replies(rnd, replies),
                   batch=True)
    assert {t for t, _ in known} == {"memory", "failures", "updates", "ground_truth", "tallies"}
    assert ("tallies", (2, 4)) in read_back and ("tallies", (2, 4)) not in known
    assert len(known) == 5 + 2 + 7 + 3 + 6
    assert verify(run_dir) == []
    with sqlite3.connect(run_dir / "audit.sqlite") as conn:
        conn.row_factory = sqlite3.Row
        assert chain.chain_breaks(conn)[0] == []
