"""The rows SQLite holds after inserting the values a writer binds, known without reading them
back: what the hash chain digests of the rows the batched writer inserts
(:meth:`fedpriv.audit.reply_rows.BatchRows.write`, :class:`fedpriv.audit.chain.PendingChain`).

The audit's tables are ``STRICT`` (:mod:`fedpriv.audit.schema`): a bound value is stored as
is or converted by its column's type. Only conversions known exactly are predicted: NULL;
an ``int`` or ``bool`` (bound as an integer) in an ``INTEGER`` column, as an integer; a
``float``, ``int`` or ``bool`` in a ``REAL`` column, as a float, with NaN stored as NULL and
−0.0 read back as 0.0 (SQLite keeps an integral REAL as an integer); a ``str`` in a ``TEXT``
and ``bytes`` in a ``BLOB`` column, as is. Any other value (a NumPy scalar, a float in an
``INTEGER`` column, a subclass of a plain type) leaves the rows unknown, and the chain reads
them back: the digest is of what the database holds, whatever that is.

The rows are checked column by column (a batch's rows of a table bind the same columns), so
that the work per value is done by a few built-in calls rather than Python steps.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from functools import cache, partial
from typing import Any

from fedpriv.audit.schema import SCHEMA_SQL

__all__ = ["stored_rows"]

_NULL = type(None)


def _as_is(kind: type, values: Sequence[Any]) -> Sequence[Any] | None:
    """A ``TEXT`` (``kind`` str) or ``BLOB`` (bytes) column's values, stored as bound."""
    return values if set(map(type, values)) <= {kind, _NULL} else None


def _integer(values: Sequence[Any]) -> Sequence[Any] | None:
    """An ``INTEGER`` column's values: ints as bound, a bool as 0/1."""
    types = set(map(type, values))
    if types <= {int, _NULL}:
        return values
    return [None if v is None else int(v) for v in values] if types <= {int, bool, _NULL} else None


def _real(values: Sequence[Any]) -> Sequence[Any] | None:
    """A ``REAL`` column's values as floats: NaN is NULL; −0.0, stored as the integer 0, reads
    back as 0.0 (adding 0.0 turns an int or bool into its float and changes no other float)."""
    if not set(map(type, values)) <= {float, int, bool, _NULL}:
        return None
    return [None if v is None or v != v else v + 0.0 for v in values]


#: By a column's declared type, its values as stored (None where not known exactly).
_COLUMNS: dict[str, Callable[[Sequence[Any]], Sequence[Any] | None]] = {
    "INTEGER": _integer, "REAL": _real, "TEXT": partial(_as_is, str),
    "BLOB": partial(_as_is, bytes),
}  # fmt: skip


@cache
def _tables() -> dict[str, dict[str, tuple[str, bool]] | None]:
    """Every table of the schema, read from SQLite itself: each column's declared type and
    whether SQLite fills it when an insert leaves it out (a default, or the rowid's alias); None
    for a table whose stored rows an insert's values do not fix (a generated or hidden column,
    which ``SELECT *`` may return, or a trigger on it)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA_SQL)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        triggered = {r[0] for r in conn.execute(
            "SELECT tbl_name FROM sqlite_master WHERE type = 'trigger'")}
        tables: dict[str, dict[str, tuple[str, bool]] | None] = {}
        for table in names:
            info = conn.execute(f"PRAGMA table_xinfo({table})").fetchall()
            if table in triggered or any(column[6] for column in info):
                tables[table] = None
                continue
            keys = [column for column in info if column[5]]
            rowid = keys[0][1] if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else None
            tables[table] = {name: (kind.upper(), default is not None or name == rowid)
                             for _, name, kind, _, default, _, _ in info}
        return tables
    finally:
        conn.close()


def stored_rows(table: str, columns: Sequence[str],
                rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]] | None:
    """The rows of ``table`` that inserting ``rows`` (values in ``columns`` order) as new rows
    leaves, each by column, a column left out NULL; None when they are not all known exactly
    (a value of another type, a column left out that SQLite would fill, a column the table
    lacks, a table with generated or hidden columns or a trigger)."""
    if not rows:
        return []
    spec = _tables()[table]
    if spec is None:
        return None
    left = [column for column in spec if column not in columns]
    if not spec.keys() >= set(columns) or any(spec[column][1] for column in left):
        return None
    held = []
    for column, values in zip(columns, zip(*rows, strict=True), strict=True):
        convert = _COLUMNS.get(spec[column][0])
        stored = None if convert is None else convert(values)
        if stored is None:
            return None
        held.append(stored)
    names, nulls = [*columns, *left], (None,) * len(left)
    return [dict(zip(names, (*row, *nulls), strict=True)) for row in zip(*held, strict=True)]
