"""Run a command and watch the memory of its whole process tree (Ray starts many processes).

Linux only (reads ``/proc``). While the command runs, a thread sums the resident (RSS) and
proportional (PSS: shared pages split between their users, so libraries and Ray's shared
object store are not counted once per process) memory of every process descended from it, or
in its session, once per ``interval`` seconds and keeps the peaks of the sums and of the
largest single process. (``ru_maxrss`` from ``wait4`` is not used: Linux carries the forking
parent's resident size into the child's high-water mark, so it reports the benchmark driver.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.machine import load_average

__all__ = ["TreeRun", "run_watched"]


@dataclass
class TreeRun:
    """What :func:`run_watched` saw."""

    returncode: int
    wall_seconds: float
    peak_pss_mib: float
    peak_rss_mib: float
    peak_largest_process_rss_mib: float
    peak_processes: int
    leftover_processes: int


def _stat(pid: str) -> tuple[int, int] | None:
    """``(ppid, session id)`` of ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[3])


def _tree(root: int) -> list[int]:
    """``root`` and every live process descended from it or in its session."""
    parent, session = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := _stat(entry)) is not None:
            parent[int(entry)], session[int(entry)] = info
    found = {root} | {pid for pid, sid in session.items() if sid == root}
    grew = True
    while grew:
        new = {pid for pid, ppid in parent.items() if ppid in found} - found
        found |= new
        grew = bool(new)
    return sorted(pid for pid in found if pid in parent)


def _memory_kib(pid: int) -> tuple[int, int]:
    """``(PSS, RSS)`` of ``pid`` in KiB (0, 0 if unreadable)."""
    pss = rss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
            elif line.startswith("Rss:"):
                rss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return pss, rss


class _Watcher(threading.Thread):
    def __init__(self, root: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.peak_pss = self.peak_rss = self.peak_single = self.peak_processes = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            pids = _tree(self.root)
            usage = [_memory_kib(pid) for pid in pids]
            self.peak_pss = max(self.peak_pss, sum(p for p, _ in usage))
            self.peak_rss = max(self.peak_rss, sum(r for _, r in usage))
            self.peak_single = max([self.peak_single, *(r for _, r in usage)])
            self.peak_processes = max(self.peak_processes, len(pids))


def run_watched(
    argv: Sequence[str], *, cwd: str, env: dict[str, str], stdout: Path, stderr: Path,
    interval: float = 1.0, timeout: float | None = None,
) -> TreeRun:
    """Run ``argv`` in a new session (stdout and stderr to files), watching its memory; its
    session is killed after ``timeout`` seconds or when this call is interrupted, and what is
    left of its tree afterwards is killed and counted (``leftover_processes``)."""
    start = time.perf_counter()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err,
                                start_new_session=True)
    watcher = _Watcher(proc.pid, interval)
    timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL)) if timeout else None
    try:
        watcher.start()
        if timer:
            timer.start()
        proc.wait()
    finally:  # interrupted or not, nothing of the command's tree outlives this call
        if timer:
            timer.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        watcher.done.set()
        if watcher.is_alive():
            watcher.join()
        leftovers = _reap_leftovers(proc.pid)
    return TreeRun(
        returncode=proc.returncode,
        wall_seconds=time.perf_counter() - start,
        peak_pss_mib=round(watcher.peak_pss / 1024, 1),
        peak_rss_mib=round(watcher.peak_rss / 1024, 1),
        peak_largest_process_rss_mib=round(watcher.peak_single / 1024, 1),
        peak_processes=watcher.peak_processes,
        leftover_processes=leftovers,
    )


def _reap_leftovers(root: int, grace: float = 10.0) -> int:
    """Processes of the finished command's tree still alive after ``grace`` s: killed, counted."""
    deadline = time.monotonic() + grace
    while (left := [pid for pid in _tree(root) if pid != root]) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(left)


def run_json(
    argv: Sequence[str], *, cwd: str, env: dict[str, str], work: Path, row: dict[str, Any],
    timeout: float | None = None,
) -> Any:
    """:func:`run_watched` with stdout to ``work/out.json``: the run's figures and the load
    after it go into ``row``; returns the parsed output, or None (``row["error"]`` holding the
    end of stderr) when the command failed."""
    run = run_watched(argv, cwd=cwd, env=env, stdout=work / "out.json",
                      stderr=work / "err.log", timeout=timeout)
    row.update(vars(run), load_after=load_average())
    if run.returncode != 0:
        row["error"] = (work / "err.log").read_text(errors="replace")[-2000:]
        return None
    return json.loads((work / "out.json").read_text())
