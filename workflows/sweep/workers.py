"""Extra sweep processes on one output directory (``fedpriv sweep --workers N``).

Each worker is an ordinary ``fedpriv sweep`` of the same configuration and ``--out``: it
claims unfinished runs one at a time (:meth:`workflows.sweep.state.SweepDir.claim`), so N
processes keep N runs going — one Flower simulation and one attack each — and every process
writes the same tables once all runs are finished. A worker's output goes to
``<out>/workers/worker-<i>.log``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["spawn_workers", "wait_for_workers"]


def spawn_workers(config: str, overrides: Sequence[str], out: Path,
                  count: int) -> list[subprocess.Popen]:
    """Start ``count`` extra ``fedpriv sweep CONFIG --set ... --out OUT`` processes."""
    logs = out / "workers"
    logs.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "fedpriv", "sweep", str(Path(config).resolve()),
               "--out", str(out), *(arg for item in overrides for arg in ("--set", item))]
    procs = []
    for i in range(1, count + 1):
        with open(logs / f"worker-{i}.log", "ab") as log:
            procs.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT))
    return procs


def wait_for_workers(procs: Sequence[subprocess.Popen]) -> list[int]:
    """Wait for the workers (they end when every run is finished); their exit codes."""
    return [proc.wait() for proc in procs]
