"""The rows the audit writes of one reply, built as the store's per-row writers build them and
laid out for :meth:`fedpriv.audit.AuditStore.write_replies`, which writes a batch of replies
with one ``executemany`` per table instead of one statement per row (issue 37).

:func:`update_values`, :func:`failure_values` and :func:`tally_values` are what
``write_update``, ``record_failure`` and ``write_tally`` store of their arguments: both paths
build a row with the same function, so a row written one way reads back as the other writes
it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from fedpriv.audit.chain import CHAINED, Entry
from fedpriv.audit.records import field_columns, insert_rows, py_value, row_values, to_json
from fedpriv.audit.schema import TALLY_FIELDS, UPDATE_FIELDS
from fedpriv.audit.stored_rows import stored_rows
from fedpriv.audit.tensors import Arrays, encode_state
from fedpriv.failures import failure_line

__all__ = ["UPDATE_COLUMNS", "BatchRows", "ReplyRows", "failure_values", "record_ids_json",
           "rewritten", "tally_upsert", "tally_values", "update_values"]

#: Every column of an ``updates`` row but its id, in the order :meth:`BatchRows.write` binds
#: them (a column a row's meta leaves out is NULL, as a plain ``INSERT`` leaves it): the
#: columns of :data:`~fedpriv.audit.schema.UPDATE_FIELDS` (what :func:`update_values` may
#: give) and those the writer sets.
UPDATE_COLUMNS = ("round", "client_id", "tensor_id", *field_columns(UPDATE_FIELDS).values(),
                  "created")
#: The columns of a ``memory`` and a ``ground_truth`` row, in the order
#: :meth:`BatchRows.write` binds them.
_MEMORY = ("round", "client_id", "kind", "state")
_TRUTH = ("round", "client_id", "record_ids_json", "tensor_id")


@dataclass(frozen=True)
class ReplyRows:
    """What the audit writes of one client's reply in a round, in the order the rows are
    chained: its ``memory`` rows (kind → named arrays, in order), the ``failure`` it records
    (kind, message), its ``updates`` row (``update``: ``write_update``'s meta; ``arrays``: the
    update itself, when the storage policy keeps it), its ``ground_truth`` (record ids and
    optional arrays) and its ``tallies`` row (``tally``: ``write_tally``'s values)."""

    client_id: int
    update: Mapping[str, Any]
    tally: Mapping[str, Any]
    arrays: Arrays | None = None
    memory: Mapping[str, Mapping[str, np.ndarray]] = field(default_factory=dict)
    failure: tuple[str, str] | None = None
    truth: tuple[Sequence[Any], Arrays | None] | None = None


@dataclass(frozen=True)
class BatchRows:
    """A batch of replies' rows laid out for one ``executemany`` per table (:meth:`write`):
    ``memory`` and ``truths`` as the statements' parameters, ``failures`` and ``updates`` as
    {column: value} in write order (every row with the same columns), ``tallies`` as runs of
    consecutive rows that give the same columns (each run one statement; the rows keep their
    order), and ``chain``: the rows' chain entries in the order the per-row writers chain
    them, a ``failures`` or ``updates`` entry's key None until its row's id is known."""

    memory: list[tuple]
    failures: list[dict[str, Any]]
    updates: list[dict[str, Any]]
    truths: list[tuple]
    tallies: list[tuple[tuple[str, ...], list[tuple]]]
    chain: list[tuple[str, tuple | None]]

    @classmethod
    def lay_out(cls, rnd: int, replies: Sequence[ReplyRows],
                tensor: Callable[[str, int, Arrays], int]) -> BatchRows:
        """The rows of ``replies`` in round ``rnd``; ``tensor(kind, client, arrays)`` writes a
        tensor file and its ``tensors`` row and returns its id (called in the order the
        per-row writers write them: a reply's update, then its true batch)."""
        out, now = cls([], [], [], [], [], []), time.time()
        for reply in replies:
            out._add(rnd, reply, tensor, now)
        return out

    def _add(self, rnd: int, reply: ReplyRows, tensor: Callable[[str, int, Arrays], int],
             now: float) -> None:
        """One reply's rows and chain entries, after those of the replies before it, in the
        order ``write_memory``, ``record_failure``, ``write_update``, ``write_ground_truth``
        and ``write_tally`` write and chain them."""
        cid = int(reply.client_id)
        for kind, state in reply.memory.items():
            self.memory.append((rnd, cid, kind, encode_state(state)))
            self.chain.append(("memory", (rnd, cid, kind)))
        if reply.failure is not None:
            self.failures.append(failure_values(rnd, *reply.failure, cid,
                                                reply.update.get("node_id")))
            self.chain.append(("failures", None))
        row = {**update_values(reply.update), "round": rnd, "client_id": cid,
               "tensor_id": self._tensor(tensor, "update", cid, reply.arrays), "created": now}
        self.updates.append({column: row.get(column) for column in UPDATE_COLUMNS})
        self.chain.append(("updates", None))
        if reply.truth is not None:
            ids, arrays = reply.truth
            truth = self._tensor(tensor, "ground_truth", cid, arrays)
            self.truths.append((rnd, cid, record_ids_json(ids), truth))
            self.chain.append(("ground_truth", (rnd, cid)))
        values = tally_values(reply.tally)
        if not self.tallies or self.tallies[-1][0] != tuple(values):
            self.tallies.append((tuple(values), []))
        self.tallies[-1][1].append((rnd, cid, *values.values()))
        self.chain.append(("tallies", (rnd, cid)))

    def _tensor(self, tensor: Callable[[str, int, Arrays], int], kind: str, cid: int,
                arrays: Arrays | None) -> int | None:
        """The id of ``arrays``' tensor file and row, written and chained now; None for none."""
        if arrays is None:
            return None
        tensor_id = tensor(kind, cid, arrays)
        self.chain.append(("tensors", (tensor_id,)))
        return tensor_id

    def write(self, conn: sqlite3.Connection) -> list[Entry]:
        """Insert the rows, one ``executemany`` per table (a tally run per statement); return
        their chain entries in order, each ``failures`` and ``updates`` entry with its id, and
        each row as the database holds it where that is known (:meth:`_held`)."""
        standing = self._standing_tallies(conn)
        conn.executemany(f"INSERT OR REPLACE INTO memory ({', '.join(_MEMORY)}) "
                         "VALUES (?, ?, ?, ?)", self.memory)
        ids = {"failures": insert_rows(conn, "failures", "failure_id", self.failures),
               "updates": insert_rows(conn, "updates", "update_id", self.updates)}
        conn.executemany(f"INSERT INTO ground_truth ({', '.join(_TRUTH)}) VALUES (?, ?, ?, ?)",
                         self.truths)
        for columns, values in self.tallies:
            conn.executemany(tally_upsert(columns), values)
        held, new_ids = self._held(ids, standing), {t: iter(i) for t, i in ids.items()}
        return [(table, (next(new_ids[table]),) if key is None else key, next(held[table]))
                for table, key in self.chain]

    def _standing_tallies(self, conn: sqlite3.Connection) -> set[tuple[int, int]]:
        """The keys of the batch's rounds' tally rows that stand before it is written."""
        rounds = sorted({row[0] for _, run in self.tallies for row in run})
        found = conn.execute("SELECT round, client_id FROM tallies WHERE round IN "
                             f"({', '.join('?' * len(rounds))})", rounds)
        return {(row[0], row[1]) for row in found}

    def _held(self, ids: Mapping[str, range],
              standing: set[tuple[int, int]]) -> dict[str, Iterator[dict | None]]:
        """By table, each row written as the database holds it, in write order
        (:func:`~fedpriv.audit.stored_rows.stored_rows`), None where not known exactly: a
        ``tensors`` row (the store inserts it), a tally row that stood before (the upsert
        keeps the columns it does not give), a row among others with a value of another
        type."""
        def numbered(table: str, rows: list[dict[str, Any]]) -> list[dict | None]:
            columns = [CHAINED[table][0], *(rows[0] if rows else ())]
            return _known(table, columns, [(i, *row.values())
                                           for i, row in zip(ids[table], rows, strict=True)])

        tallies = [row for columns, values in self.tallies
                   for row in _known("tallies", ("round", "client_id", *columns), values)]
        return {
            "memory": iter(_known("memory", _MEMORY, self.memory)),
            "failures": iter(numbered("failures", self.failures)),
            "updates": iter(numbered("updates", self.updates)),
            "ground_truth": iter(_known("ground_truth", _TRUTH, self.truths)),
            "tallies": (None if row is None or (row["round"], row["client_id"]) in standing
                        else row for row in tallies),
            "tensors": repeat(None),
        }


def _known(table: str, columns: Sequence[str], rows: list[Sequence[Any]]) -> list[dict | None]:
    """The rows as stored (:func:`~fedpriv.audit.stored_rows.stored_rows`), or None for each
    where not all are known exactly."""
    held = stored_rows(table, columns, rows)
    return [None] * len(rows) if held is None else list(held)


def rewritten(rnd: int, replies: Sequence[ReplyRows]) -> list[tuple[str, tuple]]:
    """The rows of ``replies`` a write may find written already (``memory`` and ``tallies``
    rows are upserted): a chain entry of one pending from an earlier write is chained first,
    as the row stood (:meth:`fedpriv.audit.chain.PendingChain.before_writes`)."""
    keys: list[tuple[str, tuple]] = []
    for reply in replies:
        cid = int(reply.client_id)
        keys += [("memory", (rnd, cid, kind)) for kind in reply.memory]
        keys.append(("tallies", (rnd, cid)))
    return keys


def update_values(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The ``updates`` columns of a reply's meta (keys :data:`~fedpriv.audit.schema.
    UPDATE_FIELDS`): ``status`` defaults to ``"ok"``, ``pseudo_gradient`` to ``local_steps >
    1`` (privacy-math.md §1), the error is one line and the node id decimal text (Flower's
    are unsigned 64-bit)."""
    row = row_values(meta, UPDATE_FIELDS, "update meta")
    row.setdefault("status", "ok")
    if row.get("error") is not None:
        row["error"] = failure_line(row["error"])
    if row.get("local_steps") is not None:
        row.setdefault("pseudo_gradient", int(row["local_steps"] > 1))
    if row.get("node_id") is not None:
        row["node_id"] = str(row["node_id"])
    return row


def failure_values(
    rnd: int | None, kind: str, message: str, client_id: int | None, node_id: int | str | None
) -> dict[str, Any]:
    """A ``failures`` row but its id; the message kept as one readable line
    (:func:`fedpriv.failures.failure_line`)."""
    return {
        "round": rnd, "client_id": client_id, "kind": kind, "message": failure_line(message),
        "node_id": None if node_id is None else str(node_id), "created": time.time(),
    }  # fmt: skip


def tally_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tallies`` columns of the values given (keys :data:`~fedpriv.audit.schema.
    TALLY_FIELDS`): only these are written, so an estimate that arrives later can be added."""
    return row_values(values, TALLY_FIELDS, "tally")


def tally_upsert(columns: Sequence[str]) -> str:
    """The ``INSERT`` of a tally row with these value columns (after ``round, client_id``)
    that, on an existing row, updates only them."""
    updates = ", ".join(f"{col} = excluded.{col}" for col in columns) or "round = round"
    return (f"INSERT INTO tallies ({', '.join(['round', 'client_id', *columns])}) "
            f"VALUES ({', '.join('?' * (len(columns) + 2))}) "
            f"ON CONFLICT (round, client_id) DO UPDATE SET {updates}")


def record_ids_json(record_ids: Iterable[Any]) -> str:
    """A ``ground_truth`` row's ``record_ids_json``: the batch's record ids, in order."""
    return to_json([py_value(i) for i in record_ids])
