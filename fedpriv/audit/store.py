"""The audit store: everything an honest-but-curious server keeps about one run.

A run directory holds ``audit.sqlite`` (schema in :mod:`fedpriv.audit.schema`, documented in
``docs/audit-store.md``) and ``tensors/r<round>/*.npz``. Guarantees:

* A tensor file is complete (written atomically) before the row that references it is
  committed, and the row records its SHA-256; loading verifies it.
* A round's rows are written while the round is ``running``; :meth:`AuditStore.complete_round`
  marks it ``completed`` in one transaction. A killed run keeps every completed round;
  readers ignore incomplete ones, and :meth:`AuditStore.discard_incomplete_rounds` removes
  them before a resume.
* Durability is paid once per round, not once per write: the files and rows of a running
  round are written without ``fsync`` (a killed process loses nothing the kernel holds);
  :meth:`AuditStore.complete_round` first makes every file of the round durable (one
  ``syncfs``, :func:`fedpriv.atomic.sync_files`), then commits the completion with the
  database's ``fsync``, which also covers the round's earlier rows. After a power loss a
  completed round is whole; an incomplete one may have lost files, and is discarded anyway.
  Writes to a completed round (a late attack) and the run's status are durable one by one.
* Every write of a row enters the record's hash chain in the same transaction
  (:mod:`fedpriv.audit.chain`): an insert, an update in place, a discarded round's deletions.
* :meth:`AuditStore.batch` groups writes (the auditor: all replies of a round) into one
  transaction.
* Other processes may read (``readonly=True``) while a writer writes (SQLite WAL).
* The process that drives the rounds holds the run's writer lock
  (:meth:`AuditStore.hold_writer_lock`, an ``flock`` on ``writer.lock`` that the kernel
  releases when the process dies): a resume of a run that is still going is refused.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

from fedpriv.atomic import DIR_MODE, fsync_dir, make_dirs_durable, sync_files
from fedpriv.audit import reply_rows, writer_lock
from fedpriv.audit.chain import PendingChain, append, append_deletions
from fedpriv.audit.connection import BATCHED, DURABLE, create_database, release_cache, savepoint
from fedpriv.audit.reader import DB_NAME, TENSOR_DIR, StoreReader
from fedpriv.audit.records import insert_row, py_value, row_values, to_json
from fedpriv.audit.schema import ATTACK_FIELDS, RUN_STATUSES
from fedpriv.audit.tensors import Arrays, TensorInfo, encode_state, save_arrays
from fedpriv.audit.writer_lock import LOCK_NAME
from fedpriv.failures import failure_line

__all__ = ["DB_NAME", "LOCK_NAME", "TENSOR_DIR", "AuditStore"]

_ROUND_DIR = re.compile(r"r(\d+)")


def _fedpriv_version() -> str:
    try:
        return metadata.version("fedpriv")
    except metadata.PackageNotFoundError:
        return "unknown"


class AuditStore(StoreReader):
    """Read and write one run's audit store; :meth:`create` a new one or :meth:`open` one."""

    def __init__(self, run_dir: Path, conn: sqlite3.Connection, *, readonly: bool) -> None:
        super().__init__(run_dir, conn, readonly=readonly)
        self._unsynced: dict[int, list[Path]] = {}  # running round -> files not yet fsync'ed
        self._batch: list[tuple[int, Path]] | None = None  # files of the open batch
        self._batch_status: dict[int, str | None] = {}  # round statuses read in the batch
        self._pending = PendingChain()  # the open batch's chain entries (written at its end)
        self._dirs: set[Path] = set()  # tensor directories known to exist durably

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
        """Hold the run's exclusive writer lock (:mod:`fedpriv.audit.writer_lock`) until
        :meth:`close` (or the process's death).

        Raises
        ------
        StoreError
            Another process (or another open store in this one) holds it: the run is going.
        """
        self._writer_lock = writer_lock.hold_writer_lock(self.run_dir)

    def close(self) -> None:
        """Close the database connection and release the writer lock if held."""
        super().close()
        lock = getattr(self, "_writer_lock", None)
        if lock is not None:
            lock.close()  # closing the descriptor releases the flock
            self._writer_lock = None

    # -- transactions and tensor files -------------------------------------------------------

    @contextmanager
    def _transaction(self, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction (or the open :meth:`batch`'s); ``durable`` commits with ``fsync``."""
        if self.readonly:
            raise ValueError(f"the audit store in {self.run_dir} was opened read-only")
        with self._lock:
            if self._batch is not None:
                if durable:
                    raise ValueError("a durable write (to a completed round, or of the run's "
                                     "status) cannot join a batch")
                yield self._conn
                return
            if durable:  # the level may not change inside a transaction
                self._conn.execute(f"PRAGMA synchronous = {DURABLE}")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            finally:
                if durable:
                    self._conn.execute(f"PRAGMA synchronous = {BATCHED}")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make the writes inside one transaction: all of them are stored, or (on an exception)
        none, and their tensor files are removed. Only writes to running rounds may join; a
        batch inside a batch is part of it."""
        if self._batch is not None:
            yield
            return
        with self._lock, self._transaction():
            self._batch, self._pending = [], PendingChain()
            try:
                yield
                self._pending.flush(self._conn)  # the batch's chain entries, in write order
            except BaseException:
                self._drop_files(0)
                raise
            finally:
                written, self._batch, self._pending = self._batch, None, PendingChain()
                self._batch_status.clear()
        for rnd, path in written:
            self._unsynced.setdefault(rnd, []).append(path)

    def _drop_files(self, start: int) -> None:
        """Remove the open batch's tensor files from the ``start``-th on (their rows were
        rolled back) and forget them."""
        assert self._batch is not None
        for _, path in self._batch[start:]:
            path.unlink(missing_ok=True)
        del self._batch[start:]

    def _chain(self, conn: sqlite3.Connection, table: str, key: list[Any]) -> None:
        """Chain a row just written (:func:`~fedpriv.audit.chain.append`); inside a
        :meth:`batch` when the batch ends, all its entries at once and in write order
        (:class:`~fedpriv.audit.chain.PendingChain`: the same entries and heads)."""
        if self._batch is None:
            append(conn, table, key)
        else:
            self._pending.add(table, key)

    def _rewrite(self, conn: sqlite3.Connection, table: str, key: list[Any]) -> None:
        """Before a write that may rewrite a row named by its key (an upsert, not a plain
        ``INSERT``, which fails on an existing row): a pending entry of the row is chained
        first, as the row stood."""
        if self._batch is not None:
            self._pending.before_writes(conn, [(table, tuple(key))])

    def _status(self, rnd: int) -> str | None:
        """The round's status; inside a batch read once per round (its writes cannot change a
        round's status; ``begin_round``, ``complete_round`` and ``discard_incomplete_rounds``
        forget what was read), not once per write."""
        if self._batch is not None and rnd in self._batch_status:
            return self._batch_status[rnd]
        rows = self._fetch("SELECT status FROM rounds WHERE round = ?", (rnd,))
        status = rows[0]["status"] if rows else None
        if self._batch is not None:
            self._batch_status[rnd] = status
        return status

    def _check_round(self, rnd: int, *, must_be_open: bool) -> str:
        """The round's status; ValueError if it was not begun (or is complete and
        ``must_be_open``)."""
        status = self._status(rnd)
        if status is None:
            raise ValueError(f"round {rnd} was not begun: call begin_round({rnd}) first")
        if must_be_open and status == "completed":
            raise ValueError(f"round {rnd} is complete: its records are final")
        return status

    def _tensor_dir(self, rnd: int) -> Path:
        directory = self.run_dir / TENSOR_DIR / f"r{rnd:06d}"
        if directory not in self._dirs:
            make_dirs_durable(directory)
            self._dirs.add(directory)
        return directory

    def _tensor_path(self, rnd: int, kind: str, stem: str) -> Path:
        """A new tensor file's path: unique by its random suffix, named for what it holds."""
        return self._tensor_dir(rnd) / f"{kind}-{stem}-{secrets.token_hex(4)}.npz"

    @contextmanager
    def _with_tensor(
        self, rnd: int, kind: str, stem: str, arrays: Arrays | None, *, must_be_open: bool = True
    ) -> Iterator[tuple[sqlite3.Connection, int | None]]:
        """Write ``arrays``, then yield a transaction holding its ``tensors`` row. The file of a
        running round is synced when the round completes; any other file at once."""
        running = self._check_round(rnd, must_be_open=must_be_open) == "running"
        path = None
        if arrays is not None:
            path = self._tensor_path(rnd, kind, stem)
            info = save_arrays(path, arrays, durable=not running)
        try:
            with self._transaction(durable=not running) as conn:
                if self._batch is None:  # in a batch the check above ran inside the transaction
                    self._check_round(rnd, must_be_open=must_be_open)
                tensor_id = None
                if path is not None:
                    tensor_id = self._tensor_row(conn, rnd, kind, path, info)
                    self._chain(conn, "tensors", [tensor_id])
                yield conn, tensor_id
        except BaseException:
            if path is not None:
                path.unlink(missing_ok=True)
            raise
        if path is not None and running:
            if self._batch is not None:
                self._batch.append((rnd, path))
            else:
                self._unsynced.setdefault(rnd, []).append(path)

    def _tensor_row(
        self, conn: sqlite3.Connection, rnd: int, kind: str, path: Path, info: TensorInfo
    ) -> int:
        """Insert the ``tensors`` row of a file just written; return its id."""
        return insert_row(conn, "tensors", {
            "round": rnd, "kind": kind, "path": path.relative_to(self.run_dir).as_posix(),
            "sha256": info.sha256, "names_json": to_json(info.names),
            "shapes_json": to_json(info.shapes), "dtypes_json": to_json(info.dtypes),
            "nbytes": info.nbytes, "created": time.time(),
        })  # fmt: skip

    def _batched_tensor(self, rnd: int, kind: str, client_id: int, arrays: Arrays) -> int:
        """Inside a :meth:`batch` of a running round: write ``arrays`` (synced when the round
        completes, removed if the batch fails) and insert its ``tensors`` row; its id."""
        assert self._batch is not None
        path = self._tensor_path(rnd, kind, f"c{client_id}")
        info = save_arrays(path, arrays, durable=False)
        self._batch.append((rnd, path))
        return self._tensor_row(self._conn, rnd, kind, path, info)

    # -- the run -----------------------------------------------------------------------------

    def mark_status(self, status: str, error: str | None = None) -> None:
        """Set the run's status; a final status (not ``running``) also records the finish time."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {RUN_STATUSES}")
        finished = None if status == "running" else time.time()
        error = None if error is None else failure_line(error)
        with self._transaction(durable=True) as conn:
            conn.execute(
                "UPDATE runs SET status = ?, finished = ?, error = ?", (status, finished, error)
            )
            self._chain(conn, "runs", [conn.execute("SELECT run_id FROM runs").fetchone()[0]])

    def set_rounds(self, rounds: int) -> None:
        """Set the stored config's ``rounds`` (``fedpriv simulate --resume RUN --set
        rounds=N``): an update in place of the ``runs`` row, chained as every write is."""
        with self._transaction(durable=True) as conn:
            run_id, text = conn.execute("SELECT run_id, config_json FROM runs").fetchone()
            config = {**json.loads(text), "rounds": int(rounds)}
            conn.execute("UPDATE runs SET config_json = ?", (to_json(config),))
            self._chain(conn, "runs", [run_id])

    # -- rounds ------------------------------------------------------------------------------

    def begin_round(self, rnd: int) -> None:
        """Open round ``rnd`` for writing; a round cannot be begun twice."""
        self._batch_status.pop(rnd, None)
        with self._transaction() as conn:
            row = conn.execute("SELECT status FROM rounds WHERE round = ?", (rnd,)).fetchone()
            if row is not None:
                raise ValueError(
                    f"round {rnd} exists already ({row['status']}); "
                    "before resuming a crashed run call discard_incomplete_rounds()"
                )
            insert_row(conn, "rounds", {"round": rnd, "started": time.time(), "status": "running"})
            self._chain(conn, "rounds", [rnd])

    def complete_round(self, rnd: int, metrics: Mapping[str, Any] | None = None) -> None:
        """Make every file of round ``rnd`` durable, then mark the round complete, recording
        the server's ``accuracy``/``loss`` and the rest of ``metrics`` (as JSON), in one
        durable transaction; then free the page cache the round filled."""
        self._batch_status.pop(rnd, None)
        extra = {k: py_value(v) for k, v in (metrics or {}).items()}
        accuracy, loss = extra.pop("accuracy", None), extra.pop("loss", None)
        files = self._unsynced.pop(rnd, [])
        if files:
            sync_files(files)
        with self._transaction(durable=True) as conn:
            self._check_round(rnd, must_be_open=True)
            conn.execute(
                "UPDATE rounds SET status = 'completed', completed = ?, accuracy = ?, loss = ?, "
                "metrics_json = ? WHERE round = ?",
                (time.time(), accuracy, loss, to_json(extra), rnd),
            )
            self._chain(conn, "rounds", [rnd])
        release_cache(self._conn)

    def discard_incomplete_rounds(self) -> list[int]:
        """Delete every incomplete round's rows and tensor files (for a resume); return them.

        Only call this while no other process writes to the store.
        """
        dropped = self.incomplete_rounds()
        self._batch_status.clear()
        with self._transaction(durable=True) as conn:
            if dropped:
                append_deletions(conn, dropped)
            conn.execute("DELETE FROM rounds WHERE status != 'completed'")
        for rnd in dropped:
            self._unsynced.pop(rnd, None)
        self._dirs.clear()
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
            self._chain(conn, "globals", [rnd])
        return tensor_id

    def write_aggregate(self, rnd: int, arrays: Arrays) -> int:
        """Store the global parameters after round ``rnd`` (FedAvg's aggregate, or the
        unchanged θ when nothing was aggregated), by name in the model's order, before the
        round completes: a resumed run continues from the last completed round's aggregate.
        Returns the tensor id."""
        with self._with_tensor(rnd, "aggregate", "server", arrays) as (conn, tensor_id):
            insert_row(conn, "aggregates", {"round": rnd, "tensor_id": tensor_id})
            self._chain(conn, "aggregates", [rnd])
        return tensor_id

    def write_update(
        self, rnd: int, client_id: int, arrays: Arrays | None, meta: Mapping[str, Any]
    ) -> int:
        """Store one client's reply (``arrays`` may be None for a failed or rejected one).

        ``meta`` keys: :data:`fedpriv.audit.schema.UPDATE_FIELDS`. ``status`` defaults to
        ``"ok"``; ``pseudo_gradient`` defaults to ``local_steps > 1`` (privacy-math.md §1).
        Returns the update id.
        """
        row = reply_rows.update_values(meta)
        row.update(round=rnd, client_id=int(client_id), created=time.time())
        with self._with_tensor(rnd, "update", f"c{client_id}", arrays) as (conn, tensor_id):
            update_id = insert_row(conn, "updates", {**row, "tensor_id": tensor_id})
            self._chain(conn, "updates", [update_id])
        return update_id

    def write_memory(
        self, rnd: int, client_id: int, kind: str, state: Mapping[str, Any]
    ) -> None:
        """Store what the audit remembers of a client-round (``kind``: e.g. ``"sketch"``,
        ``"canaries"``; ``state``: named arrays, stored exactly), for ``--resume``."""
        blob = encode_state(state)
        running = self._check_round(rnd, must_be_open=True) == "running"
        with self._transaction(durable=not running) as conn:
            self._rewrite(conn, "memory", [rnd, int(client_id), str(kind)])
            conn.execute("INSERT OR REPLACE INTO memory (round, client_id, kind, state) "
                         "VALUES (?, ?, ?, ?)", (rnd, int(client_id), str(kind), blob))
            self._chain(conn, "memory", [rnd, int(client_id), str(kind)])

    def write_ground_truth(
        self, rnd: int, client_id: int, record_ids: Iterable[Any], arrays: Arrays | None = None
    ) -> None:
        """Store the true batch of a client's round (scoring only): its record ids and,
        optionally, arrays such as ``{"images": ..., "labels": ...}`` (images in [0, 1])."""
        ids = reply_rows.record_ids_json(record_ids)
        with self._with_tensor(rnd, "ground_truth", f"c{client_id}", arrays) as (conn, tid):
            insert_row(conn, "ground_truth", {
                "round": rnd, "client_id": int(client_id), "record_ids_json": ids, "tensor_id": tid,
            })  # fmt: skip
            self._chain(conn, "ground_truth", [rnd, int(client_id)])

    def record_failure(
        self,
        rnd: int | None,
        kind: str,
        message: str,
        *,
        client_id: int | None = None,
        node_id: int | str | None = None,
    ) -> int:
        """Record a failed reply or run event (``kind`` in ``FAILURE_KINDS``); returns its id.
        The message is kept as one readable line (:func:`fedpriv.failures.failure_line`)."""
        row = reply_rows.failure_values(rnd, kind, message, client_id, node_id)
        running = rnd is not None and self._status(rnd) == "running"
        with self._transaction(durable=not running) as conn:
            failure_id = insert_row(conn, "failures", row)
            self._chain(conn, "failures", [failure_id])
        return failure_id

    def write_tally(self, rnd: int, client_id: int, values: Mapping[str, Any]) -> None:
        """Insert or update a client's cumulative tally after round ``rnd``.

        Only the keys given are written (:data:`fedpriv.audit.schema.TALLY_FIELDS`), so an
        estimate that arrives later can be added to the row.
        """
        row = reply_rows.tally_values(values)
        keys = [rnd, int(client_id)]
        running = self._check_round(rnd, must_be_open=False) == "running"
        with self._transaction(durable=not running) as conn:
            self._rewrite(conn, "tallies", keys)
            conn.execute(reply_rows.tally_upsert(list(row)), (*keys, *row.values()))
            self._chain(conn, "tallies", keys)

    def write_replies(self, rnd: int, replies: Sequence[reply_rows.ReplyRows]) -> None:
        """Write a batch of replies' rows (:class:`~fedpriv.audit.reply_rows.ReplyRows`) to the
        running round ``rnd``: the rows, ids and chain entries ``write_memory``,
        ``record_failure``, ``write_update``, ``write_ground_truth`` and ``write_tally`` write
        one reply after another, but one ``executemany`` per table, in one :meth:`batch`. A
        client at most once: ``updates`` refuses a second row. All or nothing even inside an
        outer batch (a savepoint): on an exception none of its rows and files remain, so a
        caller that carries on commits no row the chain lacks."""
        if not replies:
            return
        with self.batch():
            assert self._batch is not None
            self._check_round(rnd, must_be_open=True)
            self._pending.before_writes(self._conn, reply_rows.rewritten(rnd, replies))
            start = len(self._batch)
            try:
                with savepoint(self._conn, "write_replies"):
                    tensor = partial(self._batched_tensor, rnd)
                    rows = reply_rows.BatchRows.lay_out(rnd, replies, tensor)
                    self._pending.extend(rows.write(self._conn))
            except BaseException:
                self._drop_files(start)
                raise

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
            attack_id = insert_row(conn, "attacks", {**row, "tensor_id": tensor_id})
            self._chain(conn, "attacks", [attack_id])
        return attack_id
