"""The rows the audit writes of one reply, built as the store's per-row writers build them and
laid out for :meth:`fedpriv.audit.AuditStore.write_replies`, which writes a batch of replies
with one ``executemany`` per table instead of one statement per row (issue 37).

:func:`update_values`, :func:`failure_values` and :func:`tally_values` are what
``write_update``, ``record_failure`` and ``write_tally`` store of their arguments: both paths
build a row with the same function, so a row written one way reads back as the other writes
it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedpriv.audit.records import py_value, row_values, to_json
from fedpriv.audit.schema import TALLY_FIELDS, UPDATE_FIELDS
from fedpriv.audit.tensors import Arrays, encode_state
from fedpriv.failures import failure_line

__all__ = ["UPDATE_COLUMNS", "BatchRows", "ReplyRows", "chain_entries", "failure_values",
           "record_ids_json", "tally_upsert", "tally_values", "update_values"]

#: Every column of an ``updates`` row but its id, in the order :meth:`write_replies` binds
#: them (a column a row's meta leaves out is NULL, as a plain ``INSERT`` leaves it).
UPDATE_COLUMNS = ("round", "client_id", "node_id", "tensor_id", "num_examples", "local_steps",
                  "lr", "batch_size", "sample_rate", "mechanism", "mechanism_params_json",
                  "formal_guarantee", "pseudo_gradient", "status", "error", "report_json",
                  "created")


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
    """A batch of replies' rows laid out for one ``executemany`` per table
    (:meth:`fedpriv.audit.AuditStore.write_replies`): ``memory`` and ``truths`` as the
    statements' parameters, ``failures`` and ``updates`` as {column: value} in write order
    (every row with the same columns), ``tallies`` as runs of consecutive rows that give the
    same columns (each run one statement; the rows keep their order), the ids of
    the tensor files written (in write order) and the memory and tally rows that may be
    rewritten (their chain entries pending from earlier writes are written first)."""

    memory: list[tuple]
    failures: list[dict[str, Any]]
    updates: list[dict[str, Any]]
    truths: list[tuple]
    tallies: list[tuple[tuple[str, ...], list[tuple]]]
    tensors: list[int]
    rewritten: list[tuple[str, tuple]]

    @classmethod
    def lay_out(cls, rnd: int, replies: Sequence[ReplyRows],
                tensor: Callable[[str, int, Arrays], int]) -> BatchRows:
        """The rows of ``replies`` in round ``rnd``; ``tensor(kind, client, arrays)`` writes a
        tensor file and its ``tensors`` row and returns its id (called in the order the
        per-row writers write them: a reply's update, then its true batch)."""
        out, now = cls([], [], [], [], [], [], []), time.time()
        for reply in replies:
            out._add(rnd, reply, tensor, now)
        return out

    def _add(self, rnd: int, reply: ReplyRows, tensor: Callable[[str, int, Arrays], int],
             now: float) -> None:
        """One reply's rows, after those of the replies before it."""
        cid = int(reply.client_id)
        self.memory.extend((rnd, cid, kind, encode_state(state))
                           for kind, state in reply.memory.items())
        self.rewritten.extend(("memory", (rnd, cid, kind)) for kind in reply.memory)
        if reply.failure is not None:
            self.failures.append(failure_values(rnd, *reply.failure, cid,
                                                reply.update.get("node_id")))
        tid = None if reply.arrays is None else tensor("update", cid, reply.arrays)
        row = {**update_values(reply.update), "round": rnd, "client_id": cid,
               "tensor_id": tid, "created": now}
        self.updates.append({column: row.get(column) for column in UPDATE_COLUMNS})
        truth = None
        if reply.truth is not None:
            ids, arrays = reply.truth
            truth = None if arrays is None else tensor("ground_truth", cid, arrays)
            self.truths.append((rnd, cid, record_ids_json(ids), truth))
        self.tensors.extend(t for t in (tid, truth) if t is not None)
        values = tally_values(reply.tally)
        if not self.tallies or self.tallies[-1][0] != tuple(values):
            self.tallies.append((tuple(values), []))
        self.tallies[-1][1].append((rnd, cid, *values.values()))
        self.rewritten.append(("tallies", (rnd, cid)))


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


def chain_entries(
    rnd: int, rows: Sequence[ReplyRows], ids: Mapping[str, Iterator[int]]
) -> list[tuple[str, tuple]]:
    """The chain entries of a batch of replies in the order their per-row writers chain them
    (per reply: memory, failure, update tensor, update, true batch tensor, true batch, tally);
    ``ids`` gives each ``tensors``, ``failures`` and ``updates`` row's id in write order."""
    entries: list[tuple[str, tuple]] = []
    for row in rows:
        cid = int(row.client_id)
        entries += [("memory", (rnd, cid, kind)) for kind in row.memory]
        if row.failure is not None:
            entries.append(("failures", (next(ids["failures"]),)))
        if row.arrays is not None:
            entries.append(("tensors", (next(ids["tensors"]),)))
        entries.append(("updates", (next(ids["updates"]),)))
        if row.truth is not None:
            if row.truth[1] is not None:
                entries.append(("tensors", (next(ids["tensors"]),)))
            entries.append(("ground_truth", (rnd, cid)))
        entries.append(("tallies", (rnd, cid)))
    return entries
