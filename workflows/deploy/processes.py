"""Start child processes in groups and make sure none outlives its group.

Every child is started in its own session, hence its own process group, so that stopping it
also stops what it spawned (``flower-superlink`` and ``flower-supernode`` start
``flower-superexec``, which starts ``flwr-serverapp`` / ``flwr-clientapp``; the SuperLink's
``flower-superexec`` runs in a session of its own, so descendants are tracked too). Stopping
sends SIGTERM to each child and everything it started, waits, then sends SIGKILL to whatever
is left. A group stops
its children when its ``with`` block ends for any reason and when the interpreter exits
(``atexit``, which also closes every resource registered with :func:`close_on_exit`). SIGINT
and SIGTERM are fedpriv's (:func:`workflows.interrupts.install_handlers`, installed by every
group): the first raises ``KeyboardInterrupt``, so the ``with`` blocks and ``atexit`` stop
everything; a second exits at once. On Linux, children also get SIGTERM if this process dies
without running any of that (``PR_SET_PDEATHSIG``: after a second signal, or SIGKILL).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from workflows.interrupts import install_handlers

__all__ = [
    "ProcessGroup",
    "close_on_exit",
    "kill_pids",
    "kill_processes_with_env",
    "processes_with_env",
    "stop_live_groups",
]


class _Closable(Protocol):
    def close(self) -> None: ...


_LIVE: weakref.WeakSet[ProcessGroup] = weakref.WeakSet()
_RESOURCES: weakref.WeakSet[_Closable] = weakref.WeakSet()
_PR_SET_PDEATHSIG = 1
_KILL_WAIT = 5.0  # seconds to wait for SIGKILLed processes to disappear


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """``pid -> (ppid, pgid, start time)`` of every live, non-zombie process (see proc(5))."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # the fields after "pid (comm) "
        if fields[0] != "Z":
            table[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[19]))
    return table


def processes_with_env(name: str, value: str) -> list[int]:
    """Live processes of this user whose initial environment has ``name=value`` (Linux).

    Every process a :class:`workflows.deploy.federation.Federation` starts, down to the
    last ``flwr-clientapp``, inherits its unique ``FEDPRIV_FEDERATION`` marker: this finds
    them all, even those whose parent has died.
    """
    needle = f"{name}={value}".encode()
    found = []
    for pid in _proc_table():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue  # another user's process, or exited meanwhile
        if needle in environ.split(b"\0"):
            found.append(pid)
    return found


def kill_processes_with_env(name: str, value: str) -> None:
    """SIGKILL every live process of this user, but this one, whose initial environment has
    ``name=value`` (:func:`processes_with_env`); wait (at most a few seconds) until they are
    gone."""
    table = _proc_table()
    found = {(pid, table[pid][2]) for pid in processes_with_env(name, value)
             if pid != os.getpid() and pid in table}
    _signal_all(found, signal.SIGKILL)
    _wait_gone(found, [], set(), _KILL_WAIT)


def _family(procs: Sequence[subprocess.Popen[Any]], retired: set[int]) -> set[tuple[int, int]]:
    """``(pid, start time)`` of the children ``procs``, their process groups' members and all
    their descendants.

    Descendants matter because a child may start its own session (``flower-superlink`` does so
    for ``flower-superexec``); the start time tells a process from a later one reusing its pid.
    A child already reaped is found only through its process group, which outlives it while
    grandchildren remain in it (no process can take a group's id while the group exists). Once
    such a group is seen empty the child's pid is added to ``retired`` and never looked at
    again: the kernel may hand it, and its group id, to an unrelated process.
    """
    table = _proc_table()
    found: set[int] = set()
    for proc in procs:
        if proc.pid in retired:
            continue
        group = {pid for pid, (_, pgid, _) in table.items() if pgid == proc.pid}
        if proc.returncode is not None and not group:
            retired.add(proc.pid)
        found |= group | ({proc.pid} & table.keys() if proc.returncode is None else set())
    frontier = set(found)
    while frontier:
        frontier = {pid for pid, (ppid, _, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return {(pid, table[pid][2]) for pid in found}


def _alive(family: set[tuple[int, int]]) -> set[tuple[int, int]]:
    table = _proc_table()
    return {(pid, start) for pid, start in family if table.get(pid, (0, 0, -1))[2] == start}


def _wait_gone(
    family: set[tuple[int, int]],
    procs: Sequence[subprocess.Popen[Any]],
    retired: set[int],
    timeout: float,
) -> set[tuple[int, int]]:
    """Wait up to ``timeout`` s for ``family`` (and late descendants of ``procs``) to exit;
    return those still alive. Our own children are reaped as they exit."""
    deadline = time.monotonic() + timeout
    while family and time.monotonic() < deadline:
        time.sleep(0.05)
        for proc in procs:
            proc.poll()
        family = _alive(family | _family(procs, retired))
    return family


def _signal_all(family: set[tuple[int, int]], signum: int) -> None:
    kill_pids([pid for pid, _ in family], signum)


def kill_pids(pids: Sequence[int], signum: int = signal.SIGKILL) -> None:
    """Send ``signum`` to each pid, ignoring those that have exited meanwhile."""
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _die_with_parent() -> None:
    """``preexec_fn``: ask Linux to send SIGTERM to the child when its parent dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class ProcessGroup:
    """Named child processes, each leading its own process group, stopped together.

    Parameters
    ----------
    stop_timeout
        Seconds between SIGTERM and SIGKILL when stopping.
    """

    def __init__(self, stop_timeout: float = 10.0) -> None:
        self.stop_timeout = stop_timeout
        self.procs: dict[str, subprocess.Popen[Any]] = {}
        self._retired: set[int] = set()  # pids of reaped children whose groups are gone
        install_handlers()
        _LIVE.add(self)

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdout: IO[Any] | int,
        stderr: IO[Any] | int = subprocess.STDOUT,
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` as child ``name`` in a new session; stderr goes where stdout goes
        unless ``stderr`` says otherwise.

        ``stdout`` is an open file (a log) or ``subprocess.PIPE`` (text mode, line-buffered).
        """
        if name in self.procs and self.procs[name].poll() is None:
            raise RuntimeError(f"a process named {name!r} is already running")
        text = stdout == subprocess.PIPE
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only calls prctl: safe between fork and exec
            text=text,
            bufsize=1 if text else -1,
        )
        self.procs[name] = proc
        return proc

    def send_signal(self, name: str, signum: int) -> None:
        """Send ``signum`` to child ``name`` and everything it started."""
        _signal_all(_family([self.procs[name]], self._retired), signum)

    def stop(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """SIGTERM the children ``names`` (default: all) and everything they started; SIGKILL
        what is left after the timeout. Returns each child's exit code (negative: signal)."""
        chosen = {n: p for n, p in list(self.procs.items()) if names is None or n in names}
        procs = list(chosen.values())
        for proc in procs:
            proc.poll()
        family = _family(procs, self._retired)
        _signal_all(family, signal.SIGTERM)
        family = _wait_gone(family, procs, self._retired, self.stop_timeout)
        _signal_all(family, signal.SIGKILL)
        _wait_gone(family, procs, self._retired, _KILL_WAIT)
        return {name: proc.wait() for name, proc in chosen.items()}

    def stop_all(self) -> dict[str, int]:
        """Stop every child of this group (idempotent)."""
        return self.stop(None)

    def alive(self) -> list[int]:
        """Process ids of the children still alive and of everything they started."""
        procs = list(self.procs.values())
        for proc in procs:
            proc.poll()
        return sorted(pid for pid, _ in _family(procs, self._retired))


def stop_live_groups() -> None:
    """Stop the children of every :class:`ProcessGroup` not yet garbage-collected, then close
    every resource registered with :func:`close_on_exit`."""
    for group in list(_LIVE):
        group.stop_all()
    for resource in list(_RESOURCES):
        resource.close()


def close_on_exit(resource: _Closable) -> None:
    """Call ``resource.close()`` (which must be idempotent) when the interpreter exits (after
    SIGINT/SIGTERM too: :mod:`workflows.interrupts`), after the live process groups have
    stopped; forgotten once the resource is garbage-collected. For what outlives processes,
    such as network namespaces."""
    install_handlers()
    _RESOURCES.add(resource)


atexit.register(stop_live_groups)
