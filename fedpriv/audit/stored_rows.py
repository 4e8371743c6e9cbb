"""The row SQLite holds after inserting the values a writer binds, known without reading it
back: what the hash chain digests of a row the batched writer knows
(:meth:`fedpriv.audit.reply_rows.BatchRows.write`, :class:`fedpriv.audit.chain.PendingChain`).

The audit's tables are ``STRICT`` (:mod:`fedpriv.audit.schema`): a bound value is stored as
is or converted by its column's type. Only conversions known exactly are predicted: NULL;
an ``int`` or ``bool`` (bound as an integer) in an ``INTEGER`` column, as an integer; a
``float``, ``int`` or ``bool`` in a ``REAL`` column, as a float, with NaN stored as NULL and
−0.0 read back as 0.0 (SQLite keeps an integral REAL as an integer); a ``str`` in a ``TEXT``
and ``bytes`` in a ``BLOB`` column, as is. Any other value (a NumPy scalar, a float in an
``INTEGER`` column, a subclass of a plain type) leaves the row unknown, and the chain reads
it back: the digest is of what the database holds, whatever that is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from fedpriv.audit.schema import SCHEMA_SQL

__all__ = ["stored_row"]


def _same(value: Any) -> Any:
    return value


def _real(value: float) -> float | None:
    """A float as a ``REAL`` column holds it: NaN is NULL; −0.0, stored as the integer 0,
    reads back as 0.0 (adding 0.0 changes no other float)."""
    return None if value != value else value + 0.0


#: By a column's declared type, how each exactly known type of bound value is stored.
_CONVERSIONS: dict[str, dict[type, Callable[[Any], Any]]] = {
    "INTEGER": {int: _same, bool: int},
    "REAL": {float: _real, int: float, bool: float},
    "TEXT": {str: _same},
    "BLOB": {bytes: _same},
}

_Column = tuple[dict[type, Callable[[Any], Any]], bool]
"""A column's conversions (:data:`_CONVERSIONS`; none for another type) and whether SQLite
fills it when an insert leaves it out (a default, or the rowid's alias)."""


@cache
def _tables() -> dict[str, dict[str, _Column]]:
    """Every table of the schema: each column's :data:`_Column`, read from SQLite itself."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA_SQL)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        tables = {}
        for table in names:
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            keys = [column for column in info if column[5]]
            rowid = keys[0][1] if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else None
            tables[table] = {
                name: (_CONVERSIONS.get(kind.upper(), {}), default is not None or name == rowid)
                for _, name, kind, _, default, _ in info}
        return tables
    finally:
        conn.close()


def stored_row(table: str, values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row of ``table`` that inserting ``values`` (by column) as a new row leaves, a column
    left out NULL; None when it is not known exactly (a value of another type, a column left
    out that SQLite would fill, a column the table lacks)."""
    columns = _tables()[table]
    if not columns.keys() >= values.keys():
        return None
    row = {}
    for column, (conversions, filled) in columns.items():
        value = values.get(column)
        if value is None:
            if filled and column not in values:
                return None
            row[column] = None
            continue
        convert = conversions.get(type(value))
        if convert is None:
            return None
        row[column] = convert(value)
    return row
