"""The benchmarks still run: ``benchmarks/run.py --smoke`` runs every section at the smallest
sizes (one Ray start per route that uses Ray) and must report no error, in a section or in a run
inside one, and leave no process behind. It measures nothing; it keeps a benchmark from breaking
unnoticed when the library changes under it."""

import json
import os
import sys
from pathlib import Path

from benchmarks.proctree import run_watched
from benchmarks.run import SECTIONS, errors

ROOT = Path(__file__).parents[1]
TIMEOUT = 540.0  # about 60 s on 2 idle cores; room for a loaded machine, inside pytest's 600 s


def test_every_benchmark_section_runs_without_error(tmp_path):
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "FLWR_HOME": str(tmp_path / "flwr"), "PATH": path,
           "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}
    out, err = tmp_path / "smoke.json", tmp_path / "smoke.log"
    run = run_watched([sys.executable, "-m", "benchmarks.run", "--smoke", "--json"],
                      cwd=str(ROOT), env=env, stdout=out, stderr=err, timeout=TIMEOUT)
    log = err.read_text(errors="replace")
    assert run.returncode == 0, f"exit {run.returncode}, {run.wall_seconds:.0f} s\n{log[-6000:]}"
    result = json.loads(out.read_text())
    print(f"smoke run {run.wall_seconds:.1f} s:", ", ".join(  # shown with -s or on failure
        f"{name} {entry['seconds']} s" for name, entry in result["sections"].items()))
    assert result["smoke"] is True
    assert list(result["sections"]) == list(SECTIONS)
    assert errors(result) == [], "\n".join(errors(result))
    assert all("result" in entry for entry in result["sections"].values())
    assert run.leftover_processes == 0  # every Ray and simulation process was shut down
