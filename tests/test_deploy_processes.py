"""Process groups leave nothing running: on an exception, on SIGTERM/SIGINT, and for children
that ignore SIGTERM or start a session of their own. Liveness is read from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_support import PATIENCE

from fedpriv.errors import InputError
from workflows.deploy.ports import free_ports
from workflows.deploy.processes import ProcessGroup, processes_with_env

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

# a shell with two sleeping children, one of them in a session of its own
TREE = "sleep 300 & setsid sleep 301 & wait"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _wait_for(predicate, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def _start_tree(group: ProcessGroup, tmp_path: Path, script: str = TREE) -> list[int]:
    group.start(
        "tree", ["sh", "-c", script], env=os.environ, cwd=tmp_path, stdout=subprocess.DEVNULL
    )
    _wait_for(lambda: len(group.alive()) == 3)
    return group.alive()


def test_exception_in_block_kills_the_whole_tree(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), ProcessGroup(stop_timeout=5) as group:
        pids = _start_tree(group, tmp_path)
        raise RuntimeError("boom")
    assert not any(_alive(pid) for pid in pids)


def test_children_ignoring_sigterm_are_killed_after_the_timeout(tmp_path: Path) -> None:
    group = ProcessGroup(stop_timeout=0.5)
    pids = _start_tree(group, tmp_path, f"trap '' TERM; {TREE}")
    started = time.monotonic()
    codes = group.stop_all()
    assert codes == {"tree": -signal.SIGKILL}
    assert time.monotonic() - started < 290  # not waited for the sleeps' 300 s
    assert not any(_alive(pid) for pid in pids)


def test_send_signal_reaches_grandchildren(tmp_path: Path) -> None:
    with ProcessGroup(stop_timeout=5) as group:
        pids = _start_tree(group, tmp_path)
        group.send_signal("tree", signal.SIGKILL)
        _wait_for(lambda: not any(_alive(pid) for pid in pids))


def test_a_name_cannot_run_twice(tmp_path: Path) -> None:
    with ProcessGroup() as group:
        group.start("a", ["sleep", "30"], env=os.environ, cwd=tmp_path, stdout=subprocess.DEVNULL)
        with pytest.raises(RuntimeError, match="already running"):
            group.start(
                "a", ["sleep", "30"], env=os.environ, cwd=tmp_path, stdout=subprocess.DEVNULL
            )


def test_processes_with_env_finds_the_marked_ones(tmp_path: Path) -> None:
    marker = str(tmp_path)
    with ProcessGroup() as group:
        proc = group.start(
            "marked",
            ["sleep", "30"],
            env={**os.environ, "FEDPRIV_MARK": marker},
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
        )
        _wait_for(lambda: processes_with_env("FEDPRIV_MARK", marker) == [proc.pid])
    assert processes_with_env("FEDPRIV_MARK", marker) == []


SCRIPT = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from pathlib import Path
    from workflows.deploy.processes import ProcessGroup
    # Ctrl-C reaches the parent as it reaches a foreground process, even when the tests run in
    # a shell's background job (which starts with SIGINT ignored, and Python keeps that)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    group = ProcessGroup(stop_timeout=5)
    group.start("tree", ["sh", "-c", {tree!r}], env=os.environ, cwd=Path.cwd(),
                stdout=subprocess.DEVNULL)
    while len(group.alive()) < 3:
        time.sleep(0.05)
    print(" ".join(map(str, group.alive())), flush=True)
    sys.stdin.read()  # until a signal comes, or the test ends
    """
).format(tree=TREE)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_parent_stops_its_children(tmp_path: Path, signum: int) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 3 and all(_alive(pid) for pid in pids)
        parent.send_signal(signum)
        parent.wait(timeout=PATIENCE)
    finally:
        parent.kill()
        parent.wait()
    assert parent.returncode != 0
    assert not any(_alive(pid) for pid in pids)


def test_parent_killed_outright_its_children_get_sigterm(tmp_path: Path) -> None:
    """SIGKILL runs no handler: PR_SET_PDEATHSIG asks the kernel to SIGTERM the direct child;
    the shell's own children are orphaned (why the federation also sweeps by FLWR_HOME)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        parent.kill()
        parent.wait(timeout=PATIENCE)
        _wait_for(lambda: not _alive(min(pids)))  # the shell, started first
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_free_ports_are_distinct_and_bindable() -> None:
    import socket

    ports = free_ports(8)
    assert len(set(ports)) == 8
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_free_ports_needs_a_positive_count() -> None:
    with pytest.raises(InputError, match="count"):
        free_ports(0)


def test_a_stopped_group_forgets_its_pids(tmp_path: Path) -> None:
    """Once a child is reaped and its process group is empty, its pid may be reused by an
    unrelated process: the group must not signal or report it any more."""
    group = ProcessGroup(stop_timeout=5)
    _start_tree(group, tmp_path)
    leader = group.procs["tree"].pid
    group.stop_all()
    assert group.alive() == []
    assert leader in group._retired
    group.send_signal("tree", signal.SIGKILL)  # a no-op, not an error
