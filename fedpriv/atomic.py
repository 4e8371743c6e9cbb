"""Durable, all-or-nothing, private file writes (the audit store, reports, sweeps).

Files are created private (``0600``, directories ``0700``): a run holds clients' updates and,
with the simulation oracle, their images. A file written here either exists with its complete
content after a crash (process killed, power lost once the call returned) or does not exist at
all: the bytes go to a temporary file in the same directory, are flushed and fsync'ed, the
temporary file is renamed over the final name (``os.replace`` is atomic on POSIX within one
file system), and the directory is fsync'ed so that the rename itself survives a power loss.

Writes that need not be durable one by one (the audit store's files of a round still being
written) pass ``durable=False``: still atomic (temporary file and rename, so a killed process
never leaves a partial file under the final name), but the flushing is left to one
:func:`sync_files` call for the whole batch — on Linux one ``syncfs`` of the file system
instead of two ``fsync`` calls per file, 5–7× cheaper for a thousand small files.

References
----------
.. [1] POSIX.1-2017, ``rename()``: "If the link named by the new argument exists, it shall be
   removed and old renamed to new [...] a link named new shall remain visible to other
   threads throughout the renaming operation".
.. [2] SQLite, "Atomic Commit In SQLite", §3 (why the directory must be fsync'ed too),
   https://www.sqlite.org/atomiccommit.html
.. [3] Linux man-pages, ``sync(2)``: "Linux waits for I/O completions, and thus ``sync()`` or
   ``syncfs()`` provide the same guarantees as ``fsync()`` called on every file in the system
   or filesystem respectively."
"""

from __future__ import annotations

import ctypes
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = [
    "DIR_MODE", "FILE_MODE", "TEMP_SUFFIX", "atomic_write_bytes", "fsync_dir", "make_dirs_durable",
    "sync_files",
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


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically and (unless ``durable=False``) durably.

    The temporary file ``.<name>.<random>.tmp`` sits next to ``path``; on any exception it is
    removed and ``path`` is left as it was (absent, or its previous content). With
    ``durable=False`` nothing is fsync'ed: the caller passes ``path`` to :func:`sync_files`
    before relying on it surviving a power loss (a killed process loses nothing either way).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def _libc_syncfs() -> Callable[[int], int] | None:
    """Linux's ``syncfs(2)`` through the C library, or None where there is none."""
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    except OSError:
        return None


_SYNCFS = _libc_syncfs()


def _syncfs(directory: Path) -> bool:
    """Flush the whole file system holding ``directory``; False if ``syncfs`` is unavailable
    or failed (the caller then fsyncs file by file)."""
    if _SYNCFS is None:
        return False
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        return _SYNCFS(fd) == 0
    finally:
        os.close(fd)


def sync_files(files: Iterable[Path]) -> None:
    """Make ``files`` (written with ``durable=False``) and their directory entries durable.

    One ``syncfs`` per file system where the platform has it (Linux), else one ``fsync`` per
    file; then one ``fsync`` per directory. A file that no longer exists is skipped.
    """
    files = [Path(f) for f in files]
    directories = sorted({f.parent for f in files})
    devices = {}
    for directory in directories:
        devices.setdefault(directory.stat().st_dev, directory)
    if not all(_syncfs(directory) for directory in devices.values()):
        for file in files:
            try:
                fd = os.open(file, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for directory in directories:
        fsync_dir(directory)
