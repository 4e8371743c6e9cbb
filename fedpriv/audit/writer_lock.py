"""The run's writer lock: the process that drives a run's rounds holds an exclusive ``flock``
on ``writer.lock`` in the run directory, which the kernel releases when the process dies, so
that a resume of a run that is still going is refused
(:meth:`fedpriv.audit.AuditStore.hold_writer_lock`)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from fedpriv.atomic import FILE_MODE
from fedpriv.audit.errors import StoreError

__all__ = ["LOCK_NAME", "hold_writer_lock"]

#: The writer lock's file in the run directory.
LOCK_NAME = "writer.lock"


def hold_writer_lock(run_dir: Path) -> IO[str]:
    """Take the run's exclusive writer lock; it is held until the returned file is closed
    (or the process dies).

    Raises
    ------
    StoreError
        Another process (or another open store in this one) holds it: the run is going.
    """
    lock = run_dir / LOCK_NAME
    handle = os.fdopen(os.open(lock, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE), "a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreError(run_dir, "another process is writing this run",
                         "a run no process writes") from None
    return handle
