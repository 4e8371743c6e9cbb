"""Opening, validating and creating the audit store's SQLite database.

Writers use WAL journaling (readers in other processes never block on a writer, and a
writer never blocks on readers), ``synchronous=NORMAL`` by default (a committed transaction
survives a killed process; the rows of a running round need no more) with ``FULL`` switched on
by the store for each transaction that must also survive a power loss (:data:`DURABLE`,
:data:`BATCHED`; the ``fsync`` of the WAL at such a commit also makes every earlier commit
durable), and enforced foreign keys. Opening validates before
anything is read: the file is an SQLite database, carries fedpriv's ``application_id``, has
the schema version this code reads, and passes ``PRAGMA quick_check`` (which catches a
truncated or overwritten file). Every failure is a :class:`StoreError` naming the path.

References
----------
.. [1] SQLite, "Write-Ahead Logging", https://www.sqlite.org/wal.html
.. [2] SQLite, "PRAGMA synchronous", https://www.sqlite.org/pragma.html#pragma_synchronous
   (NORMAL in WAL mode: durable across an application crash; the setting may not change
   inside a transaction)
.. [3] SQLite, "Database File Format", §1.3 (header string, application id, user version),
   https://www.sqlite.org/fileformat2.html
.. [4] SQLite, "Uniform Resource Identifiers", query parameter ``immutable``,
   https://www.sqlite.org/uri.html#uriimmutable ; "Write-Ahead Logging", §"Read-Only
   Databases", https://www.sqlite.org/wal.html#readonly
.. [5] SQLite, "SAVEPOINT", https://www.sqlite.org/lang_savepoint.html
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedpriv.atomic import FILE_MODE, TEMP_SUFFIX, fsync_dir
from fedpriv.audit.chain import append
from fedpriv.audit.errors import StoreError
from fedpriv.audit.records import insert_row
from fedpriv.audit.schema import APPLICATION_ID, SCHEMA_SQL, SCHEMA_VERSION

__all__ = ["BATCHED", "BUSY_TIMEOUT_MS", "DURABLE", "connect", "create_database",
           "release_cache", "savepoint"]

#: How long a writer waits for another writer's transaction before giving up.
BUSY_TIMEOUT_MS = 60_000
#: ``PRAGMA synchronous`` of a commit that must survive a power loss.
DURABLE = "FULL"
#: ``PRAGMA synchronous`` of the writer's other commits (made durable by the next DURABLE one).
BATCHED = "NORMAL"
_HEADER = b"SQLite format 3\x00"
_STORE = f"a fedpriv audit store (schema version {SCHEMA_VERSION})"


def _raw_connect(db_path: Path, *, readonly: bool) -> sqlite3.Connection:
    if readonly:
        uri = f"{db_path.resolve().as_uri()}?mode=ro"
        if _unwritable(db_path):
            uri += "&immutable=1"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(db_path, check_same_thread=False)
    conn.isolation_level = None  # explicit BEGIN IMMEDIATE / COMMIT only
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _unwritable(db_path: Path) -> bool:
    """Whether SQLite could not create the write-ahead log a read needs: no log exists (no
    writer has the store open) and the directory cannot be written (a read-only file system,
    or another user's store). Such a store cannot change while it is read, so it is opened
    ``immutable`` ([4]_): without it SQLite refuses to open it at all."""
    wal = db_path.with_name(f"{db_path.name}-wal")
    return not wal.exists() and not os.access(db_path.parent, os.W_OK)


#: The writer's page cache, KiB (``PRAGMA cache_size`` of a negative number): a round's rows
#: (~8 KB per reply: its tally's verdict, its memory, its updates row) are written in one
#: transaction and chained as it ends (its rows read back); SQLite's default 2 MiB spills
#: the pages to the log and reads them again (measured: a third of the insert time at 1,000
#: replies). It only bounds the memory SQLite may use, the file is the same.
WRITER_CACHE_KIB = 64 * 1024


def release_cache(conn: sqlite3.Connection) -> None:
    """Free the writer's page cache (``PRAGMA shrink_memory``), called after a round's commit:
    the cache only pays inside a round's transaction, and a sweep's workers would each hold
    :data:`WRITER_CACHE_KIB` until their store closes. Measured at 5,000 replies a round: the
    ~64 MiB go back to the allocator (reused, or returned to the system by ``malloc_trim``:
    80 → 14 MiB held) and the next round takes no longer (its pages come from the OS cache)."""
    conn.execute("PRAGMA shrink_memory")


def _writer_pragmas(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {BATCHED}")
    conn.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")


@contextmanager
def savepoint(conn: sqlite3.Connection, name: str) -> Iterator[None]:
    """Make the writes inside all or nothing within the open transaction: on an exception
    they are undone (``ROLLBACK TO``) and the transaction goes on without them ([5]_)."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


def _check_header(db_path: Path) -> None:
    if not db_path.is_file():
        raise StoreError(db_path, "no audit store here (file missing)", _STORE)
    with db_path.open("rb") as handle:
        head = handle.read(len(_HEADER))
    if head and head != _HEADER:
        raise StoreError(db_path, "not an SQLite database", _STORE)


def _check_identity(conn: sqlite3.Connection, db_path: Path, *, check: bool) -> None:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise StoreError(db_path, "an SQLite database but not a fedpriv audit store", _STORE)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        raise StoreError(db_path, f"schema version {version}, written by another fedpriv "
                         f"version; this one reads schema version {SCHEMA_VERSION} only", _STORE)
    if check:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise StoreError(db_path, "corrupt database: " + "; ".join(problems), _STORE)


def connect(db_path: Path, *, readonly: bool, check: bool = True) -> sqlite3.Connection:
    """Open and validate the store's database; see the module docstring.

    Raises
    ------
    StoreError
        Missing file, not SQLite, not a fedpriv store, other schema version, truncated or
        corrupt (``check=True`` runs ``PRAGMA quick_check``, linear in the database size).
    """
    _check_header(db_path)
    conn = None
    try:
        conn = _raw_connect(db_path, readonly=readonly)
        _check_identity(conn, db_path, check=check)
        if not readonly:
            _writer_pragmas(conn)
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        raise StoreError(db_path, f"truncated or corrupt database ({exc})", _STORE) from None
    except StoreError:
        conn.close()
        raise
    return conn


def create_database(db_path: Path, run: Mapping[str, Any]) -> None:
    """Create a new store database holding the schema and the single ``runs`` row.

    The database is built under a temporary name and hard-linked into place, which fails if
    ``db_path`` exists: a store is never overwritten, and a crash leaves no half-made store.
    """
    tmp = db_path.with_name(f".{db_path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    try:
        tmp.touch(mode=FILE_MODE)  # private; SQLite's -wal and -shm files copy its mode
        _initialise(tmp, run)
        os.link(tmp, db_path)
    except FileExistsError:
        raise StoreError(db_path, "an audit store exists already", "a new run directory") from None
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(db_path.parent)


def _initialise(path: Path, run: Mapping[str, Any]) -> None:
    conn = _raw_connect(path, readonly=False)
    try:
        _writer_pragmas(conn)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.executescript(f"BEGIN; {SCHEMA_SQL}")
        insert_row(conn, "runs", run)
        append(conn, "runs", [run["run_id"]])
        conn.execute("COMMIT")
    finally:
        conn.close()  # the last connection checkpoints the WAL into the file and removes it
    with path.open("rb") as handle:
        os.fsync(handle.fileno())
