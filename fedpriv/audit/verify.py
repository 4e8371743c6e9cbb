"""Integrity check of an audit store: the database, its hash chain, every tensor file, and
stray files.

Errors: the database fails ``PRAGMA integrity_check`` or ``PRAGMA foreign_key_check``, a row
differs from its last chained version, is missing or was never chained, or the chain itself was
edited (:mod:`fedpriv.audit.chain`), or a referenced tensor file is missing, unreadable,
outside ``tensors/`` or altered (SHA-256 mismatch). Warnings: files in ``tensors/`` that no
row references (left by a crash between a file's write and its row's commit, harmless),
interrupted temporary files, and rounds begun but not completed (a crash, or a run still
going).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from fedpriv.atomic import TEMP_SUFFIX
from fedpriv.audit.chain import chain_breaks
from fedpriv.audit.errors import StoreError
from fedpriv.audit.reader import TENSOR_COLUMNS, load_tensor, tensor_info
from fedpriv.audit.store import DB_NAME, TENSOR_DIR, AuditStore
from fedpriv.audit.tensors import check_size

__all__ = ["Problem", "check_intact", "examine", "verify"]


@dataclass(frozen=True)
class Problem:
    """One finding of :func:`verify`."""

    severity: str  # "error" or "warning"
    kind: str  # "database", "chain", "tensor", "stray", "temporary", "incomplete-round";
    # fedpriv verify adds "head" and "signature" (fedpriv.commands.verify)
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The finding as a JSON-ready dict."""
        return asdict(self)


def _database(store: AuditStore) -> list[Problem]:
    db = str(store.run_dir / DB_NAME)
    found = [row["integrity_check"] for row in store.query("PRAGMA integrity_check(20)")]
    problems = [Problem("error", "database", db, m) for m in found if m != "ok"]
    for row in store.query("PRAGMA foreign_key_check"):
        message = f"row {row['rowid']} of {row['table']} references a missing {row['parent']}"
        problems.append(Problem("error", "database", db, message))
    return problems


def _check_tensor(run_dir: Path, row: dict, hashes: bool) -> None:
    if hashes:
        load_tensor(run_dir, row)
    else:
        check_size(run_dir, row["path"], tensor_info(run_dir, row).nbytes)


def _tensors(store: AuditStore, hashes: bool) -> tuple[list[Problem], set[str]]:
    problems, referenced = [], set()
    for row in store.query(f"SELECT {TENSOR_COLUMNS} FROM tensors t ORDER BY tensor_id"):
        referenced.add(row["path"])
        try:
            _check_tensor(store.run_dir, row, hashes)
        except StoreError as exc:
            problems.append(Problem("error", "tensor", exc.key, str(exc)))
    return problems, referenced


def _strays(run_dir: Path, referenced: set[str]) -> list[Problem]:
    top = run_dir / TENSOR_DIR
    if top.is_symlink():  # its files are refused one by one; never walk where it points
        return [Problem("error", "tensor", str(top), "a symbolic link, not a directory")]
    problems = []
    for path in sorted(top.rglob("*")):  # rglob follows no link below the top
        relative = path.relative_to(run_dir).as_posix()
        if path.is_dir() or relative in referenced:
            continue
        if path.name.endswith(TEMP_SUFFIX):
            problems.append(Problem("warning", "temporary", relative, "interrupted write"))
        else:
            problems.append(Problem("warning", "stray", relative, "no row references this file"))
    return problems


def examine(run_dir: Path | str, *, hashes: bool = True) -> tuple[list[Problem], list[str]]:
    """:func:`verify`'s problems, errors first in the order the record was written, and the
    recomputed head of every chain entry (empty when the chain itself is broken); all read
    from one consistent state of the store.

    Raises
    ------
    StoreError
        The database itself cannot be opened as a fedpriv store.
    """
    with AuditStore.open(run_dir, readonly=True, check=False) as store:
        db = store.run_dir / DB_NAME
        try:
            with store.snapshot() as conn:
                problems = _database(store)
                breaks, heads = chain_breaks(conn)
                tensor_problems, referenced = _tensors(store, hashes)
                incomplete = store.incomplete_rounds()
        except sqlite3.DatabaseError as exc:
            raise StoreError(db, f"truncated or corrupt database ({exc})") from None
    problems += [Problem("error", "chain", str(db), str(b)) for b in breaks]
    problems += tensor_problems + _strays(store.run_dir, referenced)
    problems += [
        Problem("warning", "incomplete-round", str(db), f"round {r} begun, not completed")
        for r in incomplete
    ]
    return problems, heads


def verify(run_dir: Path | str, *, hashes: bool = True) -> list[Problem]:
    """Check a run directory's store; return the problems found (empty: all is well).

    Parameters
    ----------
    run_dir
        The run directory.
    hashes
        Recompute every tensor file's SHA-256 (reads every byte); if False only check that
        each file exists with the recorded size.

    Raises
    ------
    StoreError
        The database itself cannot be opened as a fedpriv store.
    """
    return examine(run_dir, hashes=hashes)[0]


def check_intact(run_dir: Path | str) -> None:
    """Refuse a broken record before any work on it (``--resume``, ``fedpriv audit``): the
    chain and every tensor file's SHA-256 (:func:`verify`); warnings pass.

    Raises
    ------
    StoreError
        The first error found, in one line (the CLI exits with code 2).
    """
    errors = [p for p in verify(run_dir) if p.severity == "error"]
    if errors:
        raise StoreError(errors[0].path, f"broken audit record: {errors[0].message}",
                         "an intact record (`fedpriv verify RUN_DIR` lists every break)")
