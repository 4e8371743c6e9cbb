"""Re-render a live run's report whenever a round completes (``fedpriv report --watch``).

The store is polled read-only (SQLite WAL: the writer is never blocked); each render is a
full :func:`fedpriv.audit.report_run` — verified, with ``report.html`` — of the rounds
completed by then.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fedpriv.audit.report import report_run
from fedpriv.audit.store import AuditStore
from fedpriv.validate import check_positive

__all__ = ["watch_reports"]


def _state(run_dir: Path | str) -> tuple[tuple[int, ...], str]:
    """The completed rounds and the run's status (a light open: no quick_check per poll)."""
    with AuditStore.open(run_dir, readonly=True, check=False) as store:
        return tuple(store.completed_rounds()), str(store.run_info()["status"])


def watch_reports(
    run_dir: Path | str,
    out_dir: Path | str | None = None,
    *,
    interval: float = 2.0,
    hashes: bool = True,
    sleep: Callable[[float], Any] = time.sleep,
) -> Iterator[tuple[dict[str, Any], float]]:
    """Render the report now, then after every change of the completed rounds or of the
    run's status, polling every ``interval`` seconds; yield each report with the seconds its
    render took. Stops after the render that sees a status other than ``running``.

    Raises
    ------
    InputError
        ``interval`` is not a finite number > 0 (before anything is read).
    StoreError
        No valid store in ``run_dir`` (checked in full before the first render).
    """
    interval = check_positive("--interval", interval)
    AuditStore.open(run_dir, readonly=True).close()  # validated once, in full
    seen = None
    while True:
        state = _state(run_dir)
        if state != seen:
            seen = state
            start = time.perf_counter()
            report = report_run(run_dir, out_dir, hashes=hashes)
            yield report, time.perf_counter() - start
        if state[1] != "running":
            return
        sleep(interval)
