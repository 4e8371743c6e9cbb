"""The audit store: everything an honest-but-curious server keeps about one run.

A run directory holds ``audit.sqlite`` (schema in :mod:`fedpriv.audit.schema`, documented in
``docs/audit-store.md``) and ``tensors/r<round>/*.npz``. Guarantees:

* A tensor file is durable before the row that references it is committed, and the row
  records its SHA-256; loading verifies it.
* A round's rows are written while the round is ``running``; :meth:`AuditStore.complete_round`
  marks it ``completed`` in one transaction. A killed run keeps every completed round;
  readers ignore incomplete ones, and :meth:`AuditStore.discard_incomplete_rounds` removes
  them before a resume.
* Other processes may read (``readonly=True``) while a writer writes (SQLite WAL).
* The process that drives the rounds holds the run's writer lock
  (:meth:`AuditStore.hold_writer_lock`, an ``flock`` on ``writer.lock`` that the kernel
  releases when the process dies): a resume of a run that is still going is refused.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from fedpriv.atomic import DIR_MODE, FILE_MODE, fsync_dir, make_dirs_durable
from fedpriv.audit.connection import create_database
from fedpriv.audit.errors import StoreError
from fedpriv.audit.reader import DB_NAME, TENSOR_DIR, StoreReader, tensor_file
from fedpriv.audit.records import insert_row, py_value, row_values, to_json
from fedpriv.audit.schema import ATTACK_FIELDS, RUN_STATUSES, TALLY_FIELDS, UPDATE_FIELDS
from fedpriv.audit.tensors import Arrays, save_arrays

__all__ = ["DB_NAME", "LOCK_NAME", "TENSOR_DIR", "AuditStore", "tensor_file"]

#: The writer lock's file in the run directory.
LOCK_NAME = "writer.lock"

_ROUND_DIR = re.compile(r"r(\d+)")


def _fedpriv_version() -> str:
    try:
        return metadata.version("fedpriv")
    except metadata.PackageNotFoundError:
        return "unknown"


class AuditStore(StoreReader):
    """Read and write one run's audit store; :meth:`create` a new one or :meth:`open` one."""

    @classmethod
    def create(
        cls, run_dir: Path | str, config: Mapping[str, Any], seed: int, *, run_id: str | None = None
    ) -> AuditStore:
        """Make a new store in ``run_dir`` (created if needed); never overwrites one.

        Raises
        ------
        StoreError
            ``run_dir`` holds a store already (an :class:`~fedpriv.errors.InputError`).
        """
        run_dir = Path(run_dir)
        make_dirs_durable(run_dir / TENSOR_DIR)
        run = {
            "run_id": run_id or uuid.uuid4().hex,
            "created": time.time(),
            "fedpriv_version": _fedpriv_version(),
            "config_json": to_json(dict(config)),
            "seed": int(seed),
            "status": "running",
        }
        run_dir.chmod(DIR_MODE)
        create_database(run_dir / DB_NAME, run)
        return cls.open(run_dir, check=False)

    # -- the writer lock ---------------------------------------------------------------------

    def hold_writer_lock(self) -> None:
        """Hold the run's exclusive writer lock until :meth:`close` (or the process's death).

        Raises
        ------
        StoreError
            Another process (or another open store in this one) holds it: the run is going.
        """
        lock = self.run_dir / LOCK_NAME
        handle = os.fdopen(os.open(lock, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE), "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StoreError(
                self.run_dir, "another process is writing this run", "a run no process writes"
            ) from None
        self._writer_lock = handle

    def close(self) -> None:
        """Close the database connection and release the writer lock if held."""
        super().close()
        lock = getattr(self, "_writer_lock", None)
        if lock is not None:
            lock.close()  # closing the descriptor releases the flock
            self._writer_lock = None

    # -- transactions and tensor files -------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise ValueError(f"the audit store in {self.run_dir} was opened read-only")
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _check_round(self, rnd: int, *, must_be_open: bool) -> None:
        rows = self._fetch("SELECT status FROM rounds WHERE round = ?", (rnd,))
        row = rows[0] if rows else None
        if row is None:
            raise ValueError(f"round {rnd} was not begun: call begin_round({rnd}) first")
        if must_be_open and row["status"] == "completed":
            raise ValueError(f"round {rnd} is complete: its records are final")

    @contextmanager
    def _with_tensor(
        self, rnd: int, kind: str, stem: str, arrays: Arrays | None, *, must_be_open: bool = True
    ) -> Iterator[tuple[sqlite3.Connection, int | None]]:
        """Write ``arrays`` durably, then yield a transaction holding its ``tensors`` row."""
        self._check_round(rnd, must_be_open=must_be_open)
        relative = None
        if arrays is not None:
            relative = f"{TENSOR_DIR}/r{rnd:06d}/{kind}-{stem}-{secrets.token_hex(4)}.npz"
            make_dirs_durable((self.run_dir / relative).parent)
            info = save_arrays(self.run_dir / relative, arrays)
        try:
            with self._transaction() as conn:
                self._check_round(rnd, must_be_open=must_be_open)
                tensor_id = None
                if relative is not None:
                    tensor_id = insert_row(conn, "tensors", {
                        "round": rnd, "kind": kind, "path": relative, "sha256": info.sha256,
                        "names_json": to_json(info.names), "shapes_json": to_json(info.shapes),
                        "dtypes_json": to_json(info.dtypes), "nbytes": info.nbytes,
                        "created": time.time(),
                    })  # fmt: skip
                yield conn, tensor_id
        except BaseException:
            if relative is not None:
                (self.run_dir / relative).unlink(missing_ok=True)
            raise

    # -- the run -----------------------------------------------------------------------------

    def mark_status(self, status: str, error: str | None = None) -> None:
        """Set the run's status; a final status (not ``running``) also records the finish time."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {RUN_STATUSES}")
        finished = None if status == "running" else time.time()
        with self._transaction() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, finished = ?, error = ?", (status, finished, error)
            )

    # -- rounds ------------------------------------------------------------------------------

    def begin_round(self, rnd: int) -> None:
        """Open round ``rnd`` for writing; a round cannot be begun twice."""
        with self._transaction() as conn:
            row = conn.execute("SELECT status FROM rounds WHERE round = ?", (rnd,)).fetchone()
            if row is not None:
                raise ValueError(
                    f"round {rnd} exists already ({row['status']}); "
                    "before resuming a crashed run call discard_incomplete_rounds()"
                )
            insert_row(conn, "rounds", {"round": rnd, "started": time.time(), "status": "running"})

    def complete_round(self, rnd: int, metrics: Mapping[str, Any] | None = None) -> None:
        """Mark round ``rnd`` complete, recording the server's ``accuracy``/``loss`` and the rest
        of ``metrics`` (as JSON), in one transaction."""
        extra = {k: py_value(v) for k, v in (metrics or {}).items()}
        accuracy, loss = extra.pop("accuracy", None), extra.pop("loss", None)
        with self._transaction() as conn:
            self._check_round(rnd, must_be_open=True)
            conn.execute(
                "UPDATE rounds SET status = 'completed', completed = ?, accuracy = ?, loss = ?, "
                "metrics_json = ? WHERE round = ?",
                (time.time(), accuracy, loss, to_json(extra), rnd),
            )

    def discard_incomplete_rounds(self) -> list[int]:
        """Delete every incomplete round's rows and tensor files (for a resume); return them.

        Only call this while no other process writes to the store.
        """
        dropped = self.incomplete_rounds()
        with self._transaction() as conn:
            conn.execute("DELETE FROM rounds WHERE status != 'completed'")
        kept = set(self.completed_rounds())
        tensor_dir = self.run_dir / TENSOR_DIR
        make_dirs_durable(tensor_dir)
        for sub in tensor_dir.iterdir():
            match = _ROUND_DIR.fullmatch(sub.name)
            if match and sub.is_dir() and int(match.group(1)) not in kept:
                shutil.rmtree(sub)
        fsync_dir(tensor_dir)
        return dropped

    # -- writes ------------------------------------------------------------------------------

    def write_global(self, rnd: int, arrays: Arrays) -> int:
        """Store the parameters θ broadcast in round ``rnd``; returns the tensor id."""
        with self._with_tensor(rnd, "global", "server", arrays) as (conn, tensor_id):
            insert_row(conn, "globals", {"round": rnd, "tensor_id": tensor_id})
        return tensor_id

    def write_aggregate(self, rnd: int, arrays: Arrays) -> int:
        """Store the global parameters after round ``rnd`` (FedAvg's aggregate, or the
        unchanged θ when nothing was aggregated), by name in the model's order, before the
        round completes: a resumed run continues from the last completed round's aggregate.
        Returns the tensor id."""
        with self._with_tensor(rnd, "aggregate", "server", arrays) as (conn, tensor_id):
            insert_row(conn, "aggregates", {"round": rnd, "tensor_id": tensor_id})
        return tensor_id

    def write_update(
        self, rnd: int, client_id: int, arrays: Arrays | None, meta: Mapping[str, Any]
    ) -> int:
        """Store one client's reply (``arrays`` may be None for a failed or rejected one).

        ``meta`` keys: :data:`fedpriv.audit.schema.UPDATE_FIELDS`. ``status`` defaults to
        ``"ok"``; ``pseudo_gradient`` defaults to ``local_steps > 1`` (privacy-math.md §1).
        Returns the update id.
        """
        row = row_values(meta, UPDATE_FIELDS, "update meta")
        row.setdefault("status", "ok")
        if row.get("local_steps") is not None:
            row.setdefault("pseudo_gradient", int(row["local_steps"] > 1))
        if row.get("node_id") is not None:
            row["node_id"] = str(row["node_id"])  # Flower node ids are unsigned 64-bit
        row.update(round=rnd, client_id=int(client_id), created=time.time())
        with self._with_tensor(rnd, "update", f"c{client_id}", arrays) as (conn, tensor_id):
            return insert_row(conn, "updates", {**row, "tensor_id": tensor_id})

    def write_ground_truth(
        self, rnd: int, client_id: int, record_ids: Iterable[Any], arrays: Arrays | None = None
    ) -> None:
        """Store the true batch of a client's round (scoring only): its record ids and,
        optionally, arrays such as ``{"images": ..., "labels": ...}`` (images in [0, 1])."""
        ids = to_json([py_value(i) for i in record_ids])
        with self._with_tensor(rnd, "ground_truth", f"c{client_id}", arrays) as (conn, tid):
            insert_row(conn, "ground_truth", {
                "round": rnd, "client_id": int(client_id), "record_ids_json": ids, "tensor_id": tid,
            })  # fmt: skip

    def record_failure(
        self,
        rnd: int | None,
        kind: str,
        message: str,
        *,
        client_id: int | None = None,
        node_id: int | str | None = None,
    ) -> int:
        """Record a failed reply or run event (``kind`` in ``FAILURE_KINDS``); returns its id."""
        row = {
            "round": rnd, "client_id": client_id, "kind": kind, "message": message,
            "node_id": None if node_id is None else str(node_id), "created": time.time(),
        }  # fmt: skip
        with self._transaction() as conn:
            return insert_row(conn, "failures", row)

    def write_tally(self, rnd: int, client_id: int, values: Mapping[str, Any]) -> None:
        """Insert or update a client's cumulative tally after round ``rnd``.

        Only the keys given are written (:data:`fedpriv.audit.schema.TALLY_FIELDS`), so an
        estimate that arrives later can be added to the row.
        """
        row = row_values(values, TALLY_FIELDS, "tally")
        keys = {"round": rnd, "client_id": int(client_id)}
        updates = ", ".join(f"{col} = excluded.{col}" for col in row) or "round = round"
        sql = (
            f"INSERT INTO tallies ({', '.join([*keys, *row])}) "
            f"VALUES ({', '.join('?' * (len(keys) + len(row)))}) "
            f"ON CONFLICT (round, client_id) DO UPDATE SET {updates}"
        )
        with self._transaction() as conn:
            self._check_round(rnd, must_be_open=False)
            conn.execute(sql, (*keys.values(), *row.values()))

    def write_attack(
        self,
        rnd: int,
        client_id: int,
        result: Mapping[str, Any],
        reconstruction: Arrays | None = None,
    ) -> int:
        """Store one attack's scores (keys :data:`fedpriv.audit.schema.ATTACK_FIELDS`) and its
        reconstruction, e.g. ``{"images": ...}`` in the ground-truth order; returns its id.
        Allowed on a completed round too: attacks may finish after the round."""
        row = row_values(result, ATTACK_FIELDS, "attack result")
        row.update(round=rnd, client_id=int(client_id), created=time.time())
        with self._with_tensor(
            rnd, "reconstruction", f"c{client_id}", reconstruction, must_be_open=False
        ) as (conn, tensor_id):
            return insert_row(conn, "attacks", {**row, "tensor_id": tensor_id})
