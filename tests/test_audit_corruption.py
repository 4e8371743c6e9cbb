"""A damaged or foreign store is a clear StoreError, and ``fedpriv report`` exits 2 on it."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from fedpriv.audit import AuditStore, StoreError, verify
from workflows.cli.main import main


def _store(run_dir, rounds=2):
    with AuditStore.create(run_dir, {"clients": 3}, seed=0) as store:
        for rnd in range(1, rounds + 1):
            store.begin_round(rnd)
            for client in range(3):
                store.write_update(rnd, client, [np.ones(8)], {"mechanism": "gaussian"})
                store.write_tally(rnd, client, {"epsilon": 0.1 * rnd, "threat_model": "record"})
            store.complete_round(rnd, {"accuracy": 0.1 * rnd})
    return run_dir / "audit.sqlite"


def _truncate_half(db):
    size = db.stat().st_size
    with db.open("r+b") as handle:
        handle.truncate(size // 2)


def _overwrite(db, text="this is a text file, not a database\n" * 20):
    db.write_text(text)


def _foreign(db):
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (x TEXT)")
    conn.commit()
    conn.close()


def _future_version(db):
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()


DAMAGE = {
    "truncated": (_truncate_half, "truncated or corrupt"),
    "text file": (_overwrite, "not an SQLite database"),
    "empty file": (lambda db: _overwrite(db, ""), "not a fedpriv audit store"),
    "foreign sqlite": (_foreign, "not a fedpriv audit store"),
    "schema version": (_future_version, "schema version 99"),
}


def _damaged(tmp_path, name):
    damage, _ = DAMAGE[name]
    run_dir = tmp_path / "run"
    if name in ("foreign sqlite", "text file", "empty file"):
        run_dir.mkdir()
    else:
        _store(run_dir)
    db = run_dir / "audit.sqlite"
    damage(db)
    return run_dir, db


@pytest.mark.parametrize("name", DAMAGE)
@pytest.mark.parametrize("readonly", [False, True])
def test_damaged_store_is_a_store_error(tmp_path, name, readonly):
    run_dir, db = _damaged(tmp_path, name)
    with pytest.raises(StoreError, match=DAMAGE[name][1]) as caught:
        AuditStore.open(run_dir, readonly=readonly)
    assert caught.value.key == str(db)
    assert str(db) in str(caught.value)


def test_missing_store_and_directory(tmp_path):
    with pytest.raises(StoreError, match="no such run directory"):
        AuditStore.open(tmp_path / "nowhere")
    with pytest.raises(StoreError, match="file missing"):
        AuditStore.open(tmp_path)
    with pytest.raises(StoreError):
        verify(tmp_path)


def test_opening_a_foreign_database_does_not_change_it(tmp_path):
    db = tmp_path / "audit.sqlite"
    _foreign(db)
    before = db.read_bytes()
    with pytest.raises(StoreError):
        AuditStore.open(tmp_path)
    assert db.read_bytes() == before  # not switched to WAL, nothing written


def test_overwritten_page_found_by_integrity_check(tmp_path):
    db = _store(tmp_path / "run")
    conn = sqlite3.connect(db)  # grow the tallies b-tree over many pages, in one transaction
    with conn:
        conn.executemany(
            "INSERT INTO tallies (round, client_id, epsilon) VALUES (2, ?, 1.0)",
            [(c,) for c in range(100, 5000)],
        )
    conn.close()
    raw = bytearray(db.read_bytes())
    page = 4096
    last = len(raw) // page - 1
    raw[last * page + 8 : last * page + 600] = b"\xa5" * 592  # scribble over a b-tree page
    db.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="corrupt") as caught:
        AuditStore.open(tmp_path / "run")
    assert caught.value.key == str(db)


@pytest.mark.parametrize("name", [*DAMAGE, "missing store", "missing directory"])
def test_report_cli_exits_2_with_one_line(tmp_path, capsys, name):
    if name == "missing store":
        run_dir, what = tmp_path, str(tmp_path / "audit.sqlite")
    elif name == "missing directory":
        run_dir = what = str(tmp_path / "nowhere")
    else:
        run_dir, db = _damaged(tmp_path, name)
        what = str(db)
    capsys.readouterr()
    assert main(["report", str(run_dir), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fedpriv report: error: ") and what in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [["report"], ["audit"], ["simulate", "--resume"]])
def test_a_store_written_before_the_report_was_stored_is_refused_in_one_line(
    tmp_path, capsys, command
):
    """Schema version 4 stores kept the report's fields in columns, not the report itself:
    ``fedpriv report``, ``fedpriv audit`` and ``--resume`` refuse them, naming the version
    found and the one this fedpriv reads."""
    from fedpriv.audit.schema import SCHEMA_VERSION

    db = _store(tmp_path / "run")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 4")
    conn.close()
    with pytest.raises(StoreError) as caught:
        AuditStore.open(tmp_path / "run")
    assert SCHEMA_VERSION == 6
    assert "schema version 4" in str(caught.value) and "schema version 6" in str(caught.value)
    capsys.readouterr()
    assert main([*command, str(tmp_path / "run"), "--json"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "schema version 4" in lines[0] and "schema version 6" in lines[0]
