"""The rows the batched writer predicts SQLite holds (:func:`fedpriv.audit.stored_rows.
stored_rows`, what the hash chain digests without reading the row back) is, in the chain's
canonical bytes, the row SQLite holds — for every type of value a writer may bind to every
type of column; a value it cannot predict exactly leaves the row unknown (read back)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from fedpriv.audit.chain import canonical
from fedpriv.audit.schema import SCHEMA_SQL
from fedpriv.audit.stored_rows import stored_rows

#: A column of each declared type, in a row of its table that is otherwise valid.
_COLUMNS = {"INTEGER": ("tallies", "releases"), "REAL": ("tallies", "epsilon"),
            "TEXT": ("tallies", "accountant"), "BLOB": ("memory", "state")}
_BASE = {"tallies": {"round": 1, "client_id": 2},
         "memory": {"round": 1, "client_id": 2, "kind": "sketch", "state": b""}}
#: Values of the plain types: predicted in a column of a type that takes them.
_PLAIN = [0, -7, 2**62, 2**53 + 1, -(2**63), True, False, 1.5, -0.0, 0.0, float("nan"),
          float("inf"), -float("inf"), 5e-324, 1e300, 1e16, "", "x\x00y", 'é"\\\x7f😀', b"",
          b"\x00\xff", None]
#: The plain types each type of column takes (with NULL).
_TAKES = {"INTEGER": (int, bool), "REAL": (float, int, bool), "TEXT": (str,), "BLOB": (bytes,)}
#: Values of other types: a NumPy scalar, a subclass of a plain type, a mutable buffer.
_OTHER = [np.float32(1.1), np.float64(-0.0), np.float64(2.5), np.int64(3), np.bool_(True),
          bytearray(b"ab"), type("Text", (str,), {})("t")]


def _one(table: str, row: dict) -> dict | None:
    """:func:`stored_rows` of one row given by column."""
    held = stored_rows(table, list(row), [list(row.values())])
    return None if held is None else held[0]


def _held(table: str, row: dict) -> dict | None:
    """The row SQLite holds after inserting ``row``; None if SQLite refuses it."""
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.executescript(SCHEMA_SQL)
    try:
        conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES "
                     f"({', '.join('?' * len(row))})", list(row.values()))
    except (sqlite3.Error, OverflowError):
        return None
    held = dict(conn.execute(f"SELECT * FROM {table}").fetchone())
    conn.close()
    return held


@pytest.mark.parametrize("kind", list(_COLUMNS))
@pytest.mark.parametrize("value", _PLAIN + _OTHER, ids=repr)
def test_a_predicted_row_is_the_row_sqlite_holds(kind, value):
    table, column = _COLUMNS[kind]
    row = {**_BASE[table], column: value}
    held, predicted = _held(table, row), _one(table, row)
    if held is None:
        return  # refused: nothing is written, nothing chained
    if predicted is None:
        plain = any(value is v for v in _PLAIN)
        assert not (plain and (value is None or type(value) in _TAKES[kind])), kind
        return
    key = (1, 2)
    assert canonical(table, key, predicted) == canonical(table, key, held)


def test_a_column_sqlite_would_fill_leaves_the_row_unknown():
    """The rowid's alias left out is chosen by SQLite: not predicted; a plain column left out
    is NULL; a column the table lacks is unknown."""
    row = {"round": 1, "kind": "update", "path": "p", "sha256": "s", "names_json": "[]",
           "shapes_json": "[]", "dtypes_json": "[]", "nbytes": 1, "created": 1.0}
    assert _one("tensors", row) is None
    assert _one("tensors", {**row, "tensor_id": 4}) == _held("tensors",
                                                                   {**row, "tensor_id": 4})
    assert _one("tallies", {"round": 1, "client_id": 2})["epsilon"] is None
    assert _one("tallies", {"round": 1, "client_id": 2, "nope": 1}) is None


def test_rows_are_predicted_column_by_column_and_all_or_none():
    """Each row keeps its own values; one value not known exactly leaves every row unknown;
    no rows are no rows."""
    rows = [(1, 2, 0.5, True), (1, 3, None, 2), (1, 4, float("nan"), 0)]
    held = stored_rows("tallies", ("round", "client_id", "epsilon", "releases"), rows)
    assert [(r["client_id"], r["epsilon"], r["releases"]) for r in held] == [
        (2, 0.5, 1), (3, None, 2), (4, None, 0)]
    assert stored_rows("tallies", ("round", "client_id", "epsilon"),
                       [(1, 2, 0.5), (1, 3, np.float64(0.5))]) is None
    assert stored_rows("tallies", ("round", "client_id"), []) == []


def test_a_table_with_a_generated_column_or_a_trigger_is_read_back(monkeypatch) -> None:
    """``SELECT *`` returns a generated column the insert never named, and a trigger may change
    the row it wrote: the rows of such a table are never predicted."""
    from fedpriv.audit import stored_rows as module

    extra = ("CREATE TABLE g (a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) VIRTUAL);"
             "CREATE TABLE t (a INTEGER); CREATE TABLE u (a INTEGER);"
             "CREATE TRIGGER bump AFTER INSERT ON t BEGIN UPDATE t SET a = a + 1; END;")
    monkeypatch.setattr(module, "SCHEMA_SQL", SCHEMA_SQL + extra)
    module._tables.cache_clear()
    try:
        assert stored_rows("g", ["a"], [[1]]) is None
        assert stored_rows("t", ["a"], [[1]]) is None
        assert stored_rows("u", ["a"], [[1]]) == [{"a": 1}]
    finally:
        module._tables.cache_clear()
