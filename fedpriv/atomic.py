"""Durable, all-or-nothing, private file writes (the audit store, reports, sweeps).

Files are created private (``0600``, directories ``0700``): a run holds clients' updates and,
with the simulation oracle, their images. A file written here either exists with its complete
content after a crash (process killed, power lost once the call returned) or does not exist at
all: the bytes go to a temporary file in the same directory, are flushed and fsync'ed, the
temporary file is renamed over the final name (``os.replace`` is atomic on POSIX within one
file system), and the directory is fsync'ed so that the rename itself survives a power loss.

References
----------
.. [1] POSIX.1-2017, ``rename()``: "If the link named by the new argument exists, it shall be
   removed and old renamed to new [...] a link named new shall remain visible to other
   threads throughout the renaming operation".
.. [2] SQLite, "Atomic Commit In SQLite", §3 (why the directory must be fsync'ed too),
   https://www.sqlite.org/atomiccommit.html
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = [
    "DIR_MODE", "FILE_MODE", "TEMP_SUFFIX", "atomic_write_bytes", "fsync_dir", "make_dirs_durable",
]

#: Run data (updates, ground-truth images, configs) is private to its owner.
DIR_MODE = 0o700
FILE_MODE = 0o600

#: Suffix of the temporary files; a leftover one marks a write interrupted by a crash.
TEMP_SUFFIX = ".tmp"


def fsync_dir(directory: Path) -> None:
    """Flush a directory's entries (creations, renames, deletions) to stable storage."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durable(directory: Path) -> None:
    """Create ``directory`` and any missing parents, fsync'ing each parent that gained one."""
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(mode=DIR_MODE, exist_ok=True)
        fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably.

    The temporary file ``.<name>.<random>.tmp`` sits next to ``path``; on any exception it is
    removed and ``path`` is left as it was (absent, or its previous content).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
