"""Extra sweep processes on one output directory (``fedpriv sweep --workers N``).

Each worker is an ordinary ``fedpriv sweep`` of the same configuration and ``--out``: it
claims unfinished runs one at a time (:meth:`workflows.sweep.state.SweepDir.claim`), so N
processes keep N runs going — one Flower simulation and one attack each — and every process
writes the same tables once all runs are finished. A worker's output goes to
``<out>/workers/worker-<i>.log``. The workers are a
:class:`~workflows.deploy.processes.ProcessGroup`: they, and the simulations they started,
stop with the sweep that started them (an error, Ctrl-C, SIGTERM or its death).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from workflows.deploy.processes import ProcessGroup

__all__ = ["spawn_workers", "wait_for_workers"]


def spawn_workers(config: str, overrides: Sequence[str], out: Path, count: int) -> ProcessGroup:
    """Start ``count`` extra ``fedpriv sweep CONFIG --set ... --out OUT`` processes."""
    logs = out / "workers"
    logs.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "fedpriv", "sweep", str(Path(config).resolve()),
               "--out", str(out), *(arg for item in overrides for arg in ("--set", item))]
    group = ProcessGroup()
    for i in range(1, count + 1):
        with open(logs / f"worker-{i}.log", "ab") as log:
            group.start(f"worker-{i}", command, env=os.environ, cwd=Path.cwd(), stdout=log)
    return group


def wait_for_workers(group: ProcessGroup | None) -> list[int]:
    """Wait for the workers (they end when every run is finished); their exit codes."""
    return [] if group is None else [proc.wait() for proc in group.procs.values()]
