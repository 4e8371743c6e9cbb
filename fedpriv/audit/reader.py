"""Reading an audit store: open and validate, query rows, load verified tensors.

:class:`StoreReader` is the read half of :class:`fedpriv.audit.store.AuditStore`; open a
store with ``readonly=True`` to read it from another process while a run writes it (SQLite
WAL: readers see the last committed state and never block the writer).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import numpy as np

from fedpriv.audit.connection import connect
from fedpriv.audit.errors import StoreError
from fedpriv.audit.records import UpdateRecord
from fedpriv.audit.tensors import TensorInfo, decode_state, load_arrays
from fedpriv.protocol import ReplyError

__all__ = [
    "DB_NAME", "TENSOR_COLUMNS", "TENSOR_DIR", "StoreReader", "load_tensor", "tensor_file",
    "tensor_info",
]

DB_NAME = "audit.sqlite"
TENSOR_DIR = "tensors"
_Self = TypeVar("_Self", bound="StoreReader")


#: The ``tensors`` columns :func:`load_tensor` reads, as selected from ``tensors t``.
TENSOR_COLUMNS = "t.path, t.sha256, t.names_json, t.shapes_json, t.dtypes_json, t.nbytes"


def tensor_file(run_dir: Path, relative: str) -> Path:
    """The file a ``tensors.path`` value names; a path not below ``tensors/`` is refused
    (the file itself is reached without following links: :func:`load_tensor`)."""
    parts = PurePosixPath(relative).parts
    if len(parts) < 2 or parts[0] != TENSOR_DIR or {".", ".."} & set(parts):
        raise StoreError(run_dir / DB_NAME, f"tensor path {relative!r} outside {TENSOR_DIR}/")
    return run_dir / relative


def tensor_info(run_dir: Path, row: Mapping[str, Any]) -> TensorInfo:
    """What a ``tensors`` row (:data:`TENSOR_COLUMNS`) records of its file, checked."""
    path = tensor_file(run_dir, row["path"])
    try:
        return TensorInfo.from_row(row)
    except (ValueError, TypeError, RecursionError) as exc:
        raise StoreError(run_dir / DB_NAME, f"the row of {path} is altered ({exc})") from None


def load_tensor(run_dir: Path, row: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The arrays of a ``tensors`` row (:data:`TENSOR_COLUMNS`), read within the bounds the
    row records (:func:`fedpriv.audit.tensors.load_arrays`)."""
    return load_arrays(run_dir, row["path"], tensor_info(run_dir, row))


def _check_writable(run_dir: Path) -> None:
    """Refuse, before any work, a store this process could read but not write."""
    db = run_dir / DB_NAME
    for path in (run_dir, run_dir / TENSOR_DIR, db, db.with_name(f"{DB_NAME}-wal"),
                 db.with_name(f"{DB_NAME}-shm")):
        if path.exists() and not os.access(path, os.W_OK):
            raise StoreError(path, "cannot be written (a read-only file system, or "
                             "permissions)", "a run directory this user can write (`fedpriv "
                             "report RUN_DIR --out DIR` reads a read-only one)")


class StoreReader:
    """Read one run's audit store; open with :meth:`open`.

    One instance may be shared by threads (calls are serialised); each process opens its own.
    """

    def __init__(self, run_dir: Path, conn: sqlite3.Connection, *, readonly: bool) -> None:
        self.run_dir = run_dir
        self.readonly = readonly
        self._conn = conn
        self._lock = threading.RLock()  # one connection, shared by the caller's threads

    @classmethod
    def open(
        cls: type[_Self], run_dir: Path | str, *, readonly: bool = False, check: bool = True
    ) -> _Self:
        """Open an existing store, validating it (see :func:`fedpriv.audit.connection.connect`).

        Raises
        ------
        StoreError
            No such directory, no store in it, or the database is not a valid fedpriv store.
        """
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise StoreError(run_dir, "no such run directory", f"a directory holding {DB_NAME}")
        if not readonly:
            _check_writable(run_dir)
        conn = connect(run_dir / DB_NAME, readonly=readonly, check=check)
        return cls(run_dir, conn, readonly=readonly)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """The store's connection inside one read transaction: every query made through it
        (or through :meth:`query`) sees the same committed state while writers go on."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of a read-only SQL query, as dicts."""
        return [dict(row) for row in self._fetch(sql, params)]

    def run_info(self) -> dict[str, Any]:
        """The ``runs`` row, with ``config`` parsed and ``wall_seconds`` (None until finished)."""
        row = dict(self._fetch("SELECT * FROM runs")[0])
        row["config"] = json.loads(row.pop("config_json"))
        finished = row["finished"]
        row["wall_seconds"] = None if finished is None else finished - row["created"]
        return row

    def _rounds(self, where: str) -> list[int]:
        rows = self._fetch(f"SELECT round FROM rounds WHERE {where} ORDER BY round")
        return [row[0] for row in rows]

    def completed_rounds(self) -> list[int]:
        """Rounds marked complete, ascending."""
        return self._rounds("status = 'completed'")

    def incomplete_rounds(self) -> list[int]:
        """Rounds begun but never completed (a crash or a run still going), ascending."""
        return self._rounds("status != 'completed'")

    def last_completed_round(self) -> int | None:
        """The highest completed round, or None."""
        done = self.completed_rounds()
        return done[-1] if done else None

    def _load(self, sql: str, params: Sequence[Any], what: str) -> dict[str, np.ndarray]:
        rows = self._fetch(sql, params)
        row = rows[0] if rows else None
        if row is None or row["path"] is None:
            raise KeyError(f"the audit store holds no {what}")
        return load_tensor(self.run_dir, row)

    def load_global(self, rnd: int) -> dict[str, np.ndarray]:
        """The parameters broadcast in round ``rnd`` (SHA-256 verified)."""
        sql = f"SELECT {TENSOR_COLUMNS} FROM globals JOIN tensors t USING (tensor_id) WHERE "
        return self._load(sql + "globals.round = ?", (rnd,), f"global parameters of round {rnd}")

    def load_aggregate(self, rnd: int) -> dict[str, np.ndarray]:
        """The global parameters after round ``rnd``, by name (SHA-256 verified)."""
        sql = f"SELECT {TENSOR_COLUMNS} FROM aggregates a JOIN tensors t USING (tensor_id) "
        sql += "WHERE "
        return self._load(sql + "a.round = ?", (rnd,), f"aggregate of round {rnd}")

    def load_update(self, update_id: int) -> dict[str, np.ndarray]:
        """The arrays of update ``update_id`` (SHA-256 verified)."""
        sql = f"SELECT {TENSOR_COLUMNS} FROM updates u LEFT JOIN tensors t USING (tensor_id) "
        sql += "WHERE "
        return self._load(sql + "u.update_id = ?", (update_id,), f"arrays for update {update_id}")

    def load_ground_truth(self, rnd: int, client_id: int) -> dict[str, np.ndarray]:
        """The stored true batch of ``client_id`` in round ``rnd`` (SHA-256 verified)."""
        sql = (
            f"SELECT {TENSOR_COLUMNS} FROM ground_truth g LEFT JOIN tensors t USING (tensor_id) "
            "WHERE g.round = ? AND g.client_id = ?"
        )
        what = f"ground-truth arrays of client {client_id} in round {rnd}"
        return self._load(sql, (rnd, client_id), what)

    def load_reconstruction(self, attack_id: int) -> dict[str, np.ndarray]:
        """The reconstruction stored with attack ``attack_id`` (SHA-256 verified)."""
        sql = f"SELECT {TENSOR_COLUMNS} FROM attacks a LEFT JOIN tensors t USING (tensor_id) "
        sql += "WHERE "
        return self._load(sql + "a.attack_id = ?", (attack_id,), f"reconstruction {attack_id}")

    def iter_memory(self) -> Iterator[tuple[int, int, str, dict[str, np.ndarray]]]:
        """``(round, client, kind, state)`` of every ``memory`` row of the completed rounds, in
        round, client and kind order (:meth:`fedpriv.audit.AuditStore.write_memory`)."""
        sql = ("SELECT m.round, m.client_id, m.kind, m.state FROM memory m JOIN rounds r ON "
               "r.round = m.round WHERE r.status = 'completed' ORDER BY m.round, m.client_id, "
               "m.kind")
        for row in self._fetch(sql):
            where = f"memory row ({row['kind']}, round {row['round']}, client {row['client_id']})"
            state = decode_state(row["state"], self.run_dir / DB_NAME, where)
            yield row["round"], row["client_id"], row["kind"], state

    def iter_updates(
        self,
        rounds: Iterable[int] | None = None,
        clients: Iterable[int] | None = None,
        *,
        include_incomplete: bool = False,
    ) -> Iterator[UpdateRecord]:
        """Updates ordered by round and client, of completed rounds unless asked otherwise.

        Raises
        ------
        StoreError
            A stored report does not read back (the database was altered).
        """
        where, params = ["(r.status = 'completed' OR ?)"], [int(include_incomplete)]
        for column, wanted in (("u.round", rounds), ("u.client_id", clients)):
            if wanted is not None:
                wanted = [int(w) for w in wanted]
                where.append(f"{column} IN ({', '.join('?' * len(wanted))})")
                params.extend(wanted)
        sql = (
            "SELECT u.*, t.path, t.sha256 FROM updates u JOIN rounds r ON r.round = u.round "
            f"LEFT JOIN tensors t USING (tensor_id) WHERE {' AND '.join(where)} "
            "ORDER BY u.round, u.client_id"
        )
        for row in self._fetch(sql, params):
            try:
                record = UpdateRecord.from_row(row)
            except ReplyError as exc:
                raise StoreError(self.run_dir / DB_NAME, f"update {row['update_id']}: the "
                                 f"stored report does not read back ({exc})") from None
            yield record
