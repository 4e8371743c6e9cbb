"""Waiting on a loaded machine, and removing what a killed test session left behind.

Tests wait for events (a line on a pipe, a process's exit, a port answering), each with the
generous limit :data:`PATIENCE`: on two cores at load average 8–18 a Python process takes tens
of seconds to start, so a fixed 30 s or 60 s wait fails where nothing is wrong.
pytest-timeout (600 s, ``signal`` method) bounds a whole test and lets its ``finally`` blocks
and fixture finalisers run.

Every network namespace the suite makes is named with :func:`netns_prefix`, which holds the pid
of the pytest process; :func:`remove_leftover_namespaces` (run by ``conftest.py`` when a session
starts and ends) removes those of this session and of sessions that are no longer running —
never those of another live session, nor a deployment's (``fp`` and six hex digits).

``pytest --cpu-load N`` (``conftest.py``) runs a session on a loaded machine: :func:`cpu_load`
starts N CPU-bound processes that compete with the tests for the cores until the session ends
(they die with it, even when it is killed).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workflows.deploy.processes import ProcessGroup

__all__ = ["PATIENCE", "cpu_load", "netns_prefix", "remove_leftover_namespaces",
           "run_in_session"]

#: Seconds one awaited event may take on a loaded machine before a test gives up.
PATIENCE = 300.0

_SUITE = re.compile(r"fpt(\d+)x[0-9a-f]{4}-\S+")


def netns_prefix() -> str:
    """A :class:`workflows.deploy.netns.NetnsNetwork` prefix naming this test session."""
    return f"fpt{os.getpid()}x{secrets.token_hex(2)}"


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else ""


def remove_leftover_namespaces(*, ours: bool) -> list[str]:
    """Kill the processes in, and delete, the suite's namespaces whose session is over (and,
    with ``ours``, this session's); return their names. A no-op without root or ``ip``."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return []
    removed = []
    for line in _ip("netns", "list").splitlines():
        match = _SUITE.fullmatch(line.split()[0]) if line.strip() else None
        if match is None:
            continue
        pid = int(match.group(1))
        if _alive(pid) and not (ours and pid == os.getpid()):
            continue
        name = match.group(0)
        for member in _ip("netns", "pids", name).split():
            try:
                os.kill(int(member), signal.SIGKILL)
            except ProcessLookupError:
                pass
        _ip("netns", "delete", name)
        shutil.rmtree(Path("/etc/netns") / name, ignore_errors=True)
        removed.append(name)
    return removed


def cpu_load(count: int) -> ProcessGroup:
    """``count`` processes spinning on a core each, until the group is stopped (or this
    process dies: :class:`~workflows.deploy.processes.ProcessGroup` children get SIGTERM
    then). Imported here: ``workflows.deploy`` takes half a second to import."""
    from workflows.deploy.processes import ProcessGroup

    group = ProcessGroup(stop_timeout=5)
    for i in range(count):
        group.start(f"busy-{i}", [sys.executable, "-c", "while True: pass"], env=os.environ,
                    cwd=Path.cwd(), stdout=subprocess.DEVNULL)
    return group


def run_in_session(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str], cwd: Path,
    stop_timeout: float = 30.0,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout)`` that leaves
    nothing behind: ``argv`` runs in a session of its own
    (:class:`~workflows.deploy.processes.ProcessGroup`), and however the call ends (exit,
    TimeoutExpired, pytest-timeout) its process group and every descendant get SIGTERM, then
    SIGKILL what is left after ``stop_timeout`` s. On timeout ``subprocess.run`` SIGKILLs the
    child alone, orphaning the Ray processes (raylet, GCS) a ``fedpriv simulate`` started."""
    from workflows.deploy.processes import ProcessGroup

    group = ProcessGroup(stop_timeout=stop_timeout)
    proc = group.start("run", argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        group.stop_all()  # SIGTERM to the group and descendants, a bounded wait, SIGKILL
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr)
