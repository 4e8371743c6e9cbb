"""Several sweep processes on one output directory: exclusive claims, stale locks taken over,
a process waiting for the runs another one holds."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from workflows.config import config_from_dict
from workflows.sweep import run_sweep
from workflows.sweep.state import SweepDir

RAW = {"rounds": 2, "data": {"num_clients": 1}, "audit": {"ground_truth": True},
       "sweep": {"epsilons": [], "mechanisms": ["gaussian"], "noise_multipliers": [1.0, 2.0],
                 "attack_iterations": 3}}  # fmt: skip


@pytest.fixture()
def state(tmp_path):
    return SweepDir(tmp_path, config_from_dict(RAW))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # reaped: no process has it now (pids are not reused this fast)


def test_a_claim_is_exclusive_until_released(state):
    other = SweepDir(state.root, config_from_dict(RAW))
    assert state.claim("k") and not other.claim("k") and not state.claim("k")
    state.release("k")
    assert other.claim("k")


def test_the_lock_of_a_dead_process_is_taken_over(state):
    (state.cells_dir / "k.lock").write_text(f"{socket.gethostname()} {_dead_pid()}\n")
    assert state.claim("k")
    assert (state.cells_dir / "k.lock").read_text().split()[1] == str(os.getpid())


def test_locks_of_live_or_unknown_holders_are_respected(state):
    (state.cells_dir / "a.lock").write_text(f"{socket.gethostname()} {os.getppid()}\n")
    (state.cells_dir / "b.lock").write_text("elsewhere.example 1\n")
    (state.cells_dir / "c.lock").write_text("")  # being written
    assert not any(state.claim(k) for k in ("a", "b", "c"))


def test_a_process_waits_for_the_run_another_holds_and_never_runs_it(tmp_path, monkeypatch):
    from test_sweep_axes import StubRunner

    import workflows.sweep.run as run_module
    from workflows.sweep.plan import account_cell, run_key, sweep_setting

    monkeypatch.setattr(run_module, "POLL_SECONDS", 0.05)
    cfg = config_from_dict(RAW)
    other = SweepDir(tmp_path, cfg)
    setting = sweep_setting(cfg)
    held = account_cell(setting, "gaussian", 1.0)
    assert other.claim(run_key(held, 0))  # "another process" holds the σ = 1 run ...

    def other_process() -> None:  # ... and finishes it while this one waits
        time.sleep(0.5)
        run_module._run(cfg, setting, held, 0, other, StubRunner())
        other.release(run_key(held, 0))

    thread = threading.Thread(target=other_process)
    thread.start()
    runner = StubRunner()
    result = run_sweep(cfg, tmp_path, runner=runner)
    thread.join()
    assert [c.mechanism.value("noise_multiplier") for c, _ in runner.calls] == [2.0]
    assert result["cells_run"] == ["gaussian-noise_multiplier2-L16-seed0"]
    assert len(result["rows"]) == 2 and all(r["accuracy"] is not None for r in result["rows"])
