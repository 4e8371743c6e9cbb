"""Conversions between Python values and audit-store rows.

Writers hand the store plain mappings (``meta``, ``values``, ``result``); :func:`row_values`
checks their keys against the schema's field lists, turns NumPy scalars into Python numbers,
booleans into 0/1 and the JSON fields into text. Readers get :class:`UpdateRecord` objects,
which give the client's report back as the server read it
(:meth:`fedpriv.protocol.ClientReport.from_config` of the stored mapping).
A float NaN is stored by SQLite as NULL, i.e. "not measured"; ±inf is stored as is.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from fedpriv.protocol import ClientReport

__all__ = ["JSON_FIELDS", "UpdateRecord", "field_columns", "insert_row", "insert_rows",
           "py_value", "row_values", "to_json"]

#: Fields holding a JSON document; the column is the field name + ``_json``.
JSON_FIELDS = frozenset({"mechanism_params", "details", "estimate", "verification",
                         "epsilon_lower", "epsilon_observed", "report", "prior", "settings"})


def py_value(value: Any) -> Any:
    """A value SQLite's STRICT columns accept: NumPy scalars unwrapped, booleans as 0/1."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_ENCODER = json.JSONEncoder(default=_json_default, check_circular=False)
"""``json.dumps(value, default=_json_default)``'s encoder, built once instead of once per call
(the store encodes a few JSON fields per reply). The values are trees the audit builds (no
cycles), so the cycle bookkeeping is skipped: the text is the same."""


def to_json(value: Any) -> str:
    """JSON text of ``value``; NumPy scalars and arrays become numbers and lists."""
    return _ENCODER.encode(value)


_PLAIN = frozenset({str, int, float, type(None)})
"""Types :func:`py_value` returns unchanged (``bool`` is a subclass of int, not this type)."""


@cache
def field_columns(allowed: tuple[str, ...]) -> dict[str, str]:
    """Each allowed key's column: a JSON field's name + ``_json``, any other its own name."""
    return {key: f"{key}_json" if key in JSON_FIELDS else key for key in allowed}


def row_values(values: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> dict[str, Any]:
    """Map writer-supplied ``values`` to column values; unknown keys are an error.

    Raises
    ------
    ValueError
        A key that the schema does not know (a typo would otherwise lose a number silently).
    """
    columns = field_columns(allowed)
    if not columns.keys() >= values.keys():
        unknown = sorted(set(values) - set(allowed))
        raise ValueError(f"unknown {what} keys {unknown}; allowed: {', '.join(allowed)}")
    row = {}
    for key, value in values.items():
        if key in JSON_FIELDS:
            row[columns[key]] = None if value is None else to_json(value)
        else:
            row[key] = value if type(value) in _PLAIN else py_value(value)
    return row


def insert_row(conn: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> int:
    """``INSERT`` one row given as {column: value}; return its rowid."""
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
    return conn.execute(sql, tuple(row.values())).lastrowid


def insert_rows(
    conn: sqlite3.Connection, table: str, key: str, rows: Sequence[Mapping[str, Any]]
) -> range:
    """``INSERT`` rows given as {column: value}, each with the same columns, by one
    ``executemany``; return their ids. Each gets the id SQLite gives one ``INSERT`` after
    another (one above the table's largest, for an ``INTEGER PRIMARY KEY`` without
    ``AUTOINCREMENT``), set explicitly, so that the caller knows them."""
    if not rows:
        return range(0)
    first = conn.execute(f"SELECT COALESCE(MAX({key}), 0) + 1 FROM {table}").fetchone()[0]
    columns = [key, *rows[0]]
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    conn.executemany(sql, [(first + i, *row.values()) for i, row in enumerate(rows)])
    return range(first, first + len(rows))


def _flag(value: int | None) -> bool | None:
    return None if value is None else bool(value)


@dataclass(frozen=True)
class UpdateRecord:
    """One client's reply in one round, as stored (load its arrays with ``load_update``).

    ``report`` is the client's :class:`~fedpriv.protocol.ClientReport`, its mechanism built
    once as the row is read; None for a reply that carried no readable report (an exception,
    a timeout, a malformed reply).
    """

    update_id: int
    round: int
    client_id: int
    node_id: str | None
    status: str
    error: str | None
    path: str | None
    sha256: str | None
    formal_guarantee: bool | None
    pseudo_gradient: bool | None
    created: float
    report: ClientReport | None = None

    @property
    def stored(self) -> bool:
        """Whether the update's arrays are in the store (``audit.store_updates`` may skip an
        accepted one; a failed or rejected reply has none)."""
        return self.path is not None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> UpdateRecord:
        """Build a record from a row of ``updates`` joined with ``tensors`` (path, sha256).

        Raises
        ------
        fedpriv.protocol.ReplyError
            The stored report does not read back (an altered database).
        """
        report = row["report_json"]
        return cls(
            **{
                name: row[name]
                for name in cls.__dataclass_fields__
                if name not in ("report", "formal_guarantee", "pseudo_gradient")
            },
            formal_guarantee=_flag(row["formal_guarantee"]),
            pseudo_gradient=_flag(row["pseudo_gradient"]),
            report=ClientReport.from_config(json.loads(report)) if report else None,
        )
