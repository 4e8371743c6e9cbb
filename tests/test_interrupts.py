"""SIGINT and SIGTERM stop a command (the first) or end it at once (the second).

The fast tests run :func:`workflows.interrupts.install_handlers` in a helper process started
with SIGINT ignored, as a shell's background job starts. The slow tests start ``fedpriv
simulate`` on Ray in a session of its own (as a terminal starts a job), wait until round 2 is
completed in its store, then send SIGINT to its process group (Ctrl-C), SIGTERM to its pid
(``kill``) or SIGINT to its pid when it started with SIGINT ignored (``kill -INT`` to a
background job): it must exit within 30 s, its run ``interrupted`` with a report of the completed
rounds, leaving no process behind; ``--resume`` then ends where an uninterrupted run ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_support import PATIENCE
from reliability_support import QUICKSTART, assert_same_outcome

from fedpriv.audit import AuditStore
from fedpriv.errors import InputError

ROOT = Path(__file__).resolve().parents[1]

# Handlers installed over an inherited SIG_IGN; after the first signal the helper says so and
# waits again, until the second signal (or the end of the test: its stdin closes).
HELPER = textwrap.dedent(
    """
    import sys
    from workflows.interrupts import install_handlers
    install_handlers()
    try:
        print("ready", flush=True)  # in the try: the signal may come as soon as it is read
        sys.stdin.readline()
    except KeyboardInterrupt as exc:
        print("interrupted", exc, flush=True)
    sys.stdin.readline()
    print("not exited", flush=True)
    """
)


def _ignore_sigint() -> None:  # preexec_fn: what a shell does for a background job
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_interrupts_and_second_exits_at_once(signum: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HELPER], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=_ignore_sigint)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        assert proc.stdout.readline() == f"interrupted {signal.Signals(signum).name}\n"
        proc.send_signal(signum)
        assert proc.wait(timeout=PATIENCE) == 128 + signum
        assert proc.stdout.read() == ""  # nothing ran after the second signal
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- fedpriv simulate, on Ray

SETS = ["rounds=6", "data.num_clients=3", "train.local_steps=2", "train.lr=1.0",
        "train.batch_size=16"]  # fmt: skip
ROUNDS = 6
EXIT_SECONDS = 30.0


def _fedpriv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fedpriv", *args], capture_output=True,
                          text=True, timeout=600, check=False)


def _completed(run_dir: Path) -> int:
    try:
        with AuditStore.open(run_dir, readonly=True, check=False) as store:
            return len(store.completed_rounds())
    except InputError:  # not created yet
        return 0


def _session(sid: int) -> set[tuple[int, int]]:
    """``(pid, start time)`` of the live processes of session ``sid``: everything the process
    that leads it started and that did not leave the session (Ray's processes included)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split() if stat else []
        if fields and fields[0] != "Z" and int(fields[3]) == sid:
            found.add((int(entry.name), int(fields[19])))
    return found


def _alive(processes: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Those of ``processes`` still alive (the same pid and start time, not a zombie)."""
    live = set()
    for pid, start in processes:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[19]) == start:
            live.add((pid, start))
    return live


def _interrupt_at_round_2(
    run_dir: Path, signum: int, *, group: bool, background: bool
) -> subprocess.Popen:
    """Start ``fedpriv simulate`` in a session of its own (with SIGINT ignored if
    ``background``, as a shell's background job), send ``signum`` (to its group, or to its
    pid) once round 2 is completed, and check how it stopped."""
    sets = [a for s in SETS for a in ("--set", s)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedpriv", "simulate", str(QUICKSTART), *sets, "--out",
         str(run_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=_ignore_sigint if background else None,
    )  # fmt: skip
    seen: set[tuple[int, int]] = set()
    try:
        deadline = time.monotonic() + PATIENCE
        while _completed(run_dir) < 2:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "round 2 never completed"
            seen |= _session(proc.pid)
            time.sleep(0.1)
        seen |= _session(proc.pid)
        assert any(pid != proc.pid for pid, _ in seen), "Ray's processes were not seen"
        sent = time.monotonic()
        if group:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        _, stderr = proc.communicate(timeout=PATIENCE)
        took = time.monotonic() - sent
        left = _session(proc.pid) | _alive(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pid, _ in _alive(seen | _session(proc.pid)):  # nothing of it may outlive the test
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert took < EXIT_SECONDS, f"exited {took:.1f} s after the signal"
    assert proc.returncode == 128 + signum, stderr[-2000:]
    assert f"interrupted; resume with: fedpriv simulate --resume {run_dir}" in stderr
    assert left == set(), f"processes left behind: {sorted(left)}"
    with AuditStore.open(run_dir, readonly=True) as store:
        assert store.run_info()["status"] == "interrupted"
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "interrupted" and 2 <= report["rounds"] < ROUNDS
    assert report["completed_rounds"] == list(range(1, report["rounds"] + 1))
    assert (run_dir / "report.html").is_file()
    return proc


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    run_dir = tmp_path_factory.mktemp("full") / "run"
    sets = [a for s in SETS for a in ("--set", s)]
    full = _fedpriv("simulate", str(QUICKSTART), *sets, "--out", str(run_dir), "--json")
    assert full.returncode == 0, full.stderr[-2000:]
    return json.loads(full.stdout), run_dir


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "group", "background"),
    [(signal.SIGINT, True, False), (signal.SIGTERM, False, False), (signal.SIGINT, False, True)],
    ids=["ctrl-c-to-the-group", "kill-term-to-the-pid", "kill-int-to-a-background-job"],
)
def test_signal_stops_simulate_then_resume_ends_as_uninterrupted(
    uninterrupted: tuple[dict, Path], tmp_path: Path, signum: int, group: bool, background: bool
) -> None:
    run_dir = tmp_path / "run"
    _interrupt_at_round_2(run_dir, signum, group=group, background=background)
    resumed = _fedpriv("simulate", "--resume", str(run_dir), "--json")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    want, want_dir = uninterrupted
    assert_same_outcome(json.loads(resumed.stdout), want, run_dir, want_dir, ROUNDS)
