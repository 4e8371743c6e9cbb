"""Seconds per federated round on Ray, the cost of auditing, and scaling with the client count.

``python -m benchmarks.simulation [--quick]`` prints one JSON object. Every run is a
``fedpriv simulate configs/quickstart.toml`` subprocess (paper MLP on the offline digits,
Gaussian σ = 1, batch 32, 20 local steps, 2 Ray CPUs) with ``--set`` overrides for the client
count, the rounds and the audit mode:

* ``off`` — ``audit.enabled = false``: replies are validated and aggregated; the store records
  rounds and accuracy only (checked: no update rows);
* ``logging`` — the default audit without its attacks (``audit.attacks = []``): every update
  written to the store (fsync'd tensor files), per-client ε, log capacity and Bayesian-privacy
  bounds;
* ``attacks`` — logging plus IGA on one client per round (``audit.clients = 1``, few
  iterations), inline on the server.

Per-round time excludes Ray start-up and actor spin-up: it is the spacing of the ``completed``
timestamps of rounds 2…R in the audit store's ``rounds`` table (a whole round trip: broadcast,
local training, replies, auditing, central evaluation). ``startup_seconds`` (launch to round 1
start: interpreter, Ray start, data, initial evaluation) and ``round1_seconds`` (includes the
client actors' start-up) are reported apart. Memory is the peak over the process
tree (:mod:`benchmarks.proctree`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.machine import load_average
from benchmarks.proctree import run_json
from benchmarks.timing import ratio, summarize

__all__ = ["MODES", "measure", "simulate_once"]

ROOT = Path(__file__).resolve().parent.parent
PRESET = "configs/quickstart.toml"
MODES = {
    "off": ["audit.enabled=false"],
    "logging": ["audit.attacks=[]"],
    "attacks": ['audit.attacks=["iga"]', "audit.clients=1", "audit.every=1",
                "audit.iterations={iterations}"],
}
AIM = 1.10
SMOKE_SETS = ["simulation.ray_cpus=1"]
"""``--set`` overrides of smoke runs: one client actor, so one interpreter imports torch."""


def _store_facts(run_dir: Path, launched: float) -> dict[str, Any]:
    """Round timestamps and row counts from the run's audit store (``launched``: Unix time the
    subprocess started)."""
    with sqlite3.connect(f"file:{run_dir / 'audit.sqlite'}?mode=ro", uri=True) as conn:
        rounds = conn.execute(
            "SELECT round, started, completed FROM rounds WHERE round >= 1 ORDER BY round"
        ).fetchall()
        counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]  # noqa: S608
                  for t in ("updates", "tallies", "attacks")}
        attack_s = [r[0] for r in conn.execute("SELECT seconds FROM attacks") if r[0] is not None]
    spacing = [b[2] - a[2] for a, b in zip(rounds, rounds[1:], strict=False)]
    return {
        "round_spacings": [round(x, 3) for x in spacing],
        "round_seconds": summarize(spacing, digits=3) if spacing else None,
        "round1_seconds": round(rounds[0][2] - rounds[0][1], 2) if rounds else None,
        "startup_seconds": round(rounds[0][1] - launched, 2) if rounds else None,
        "rows": counts,
        "attack_seconds": summarize(attack_s, digits=3) if attack_s else None,
        "store_mib": round(sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file())
                           / 2**20, 2),
    }


def simulate_once(clients: int, mode: str, rounds: int, iterations: int = 100,
                  timeout: float = 1800.0, extra: Sequence[str] = ()) -> dict[str, Any]:
    """One ``fedpriv simulate`` run (``extra``: more ``--set`` overrides, applied last); never
    raises (a failed run is reported as such)."""
    work = Path(tempfile.mkdtemp(prefix=f"fedpriv-bench-{clients}-{mode}-"))
    sets = [f"data.num_clients={clients}", f"rounds={rounds}"]
    sets += [s.format(iterations=iterations) for s in MODES[mode]] + list(extra)
    argv = [sys.executable, "-m", "fedpriv", "simulate", PRESET, "--out", str(work / "run"),
            "--json", *[a for s in sets for a in ("--set", s)]]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    row: dict[str, Any] = {"clients": clients, "mode": mode, "rounds": rounds, "set": sets,
                           "load_before": load_average()}
    launched = time.time()
    try:
        report = run_json(argv, cwd=str(ROOT), env=env, work=work, row=row, timeout=timeout)
        if report is None:
            return row
        row["final_accuracy"] = report["accuracy"][-1] if report["accuracy"] else None
        row["storage"] = report.get("storage")
        row.update(_store_facts(work / "run", launched))
    except Exception as exc:  # a benchmark reports, it does not fail
        row["error"] = repr(exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


def _pooled(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Round times of several runs of one setting, pooled; memory peaks, largest."""
    spacings = [x for r in runs for x in r.get("round_spacings", [])]
    if not spacings:
        return None
    return {"clients": runs[0]["clients"], "mode": runs[0]["mode"], "runs": len(runs),
            "round_seconds": summarize(spacings, digits=3),
            "peak_pss_mib": max(r.get("peak_pss_mib", 0) for r in runs),
            "peak_largest_process_rss_mib": max(r.get("peak_largest_process_rss_mib", 0)
                                                for r in runs)}


def _overhead(
    pooled: dict[str, Any], runs: list[dict[str, Any]], clients: int
) -> dict[str, Any] | None:
    off, logging = pooled.get(f"{clients}/off"), pooled.get(f"{clients}/logging")
    if not (off and logging):
        return None
    honoured = all(r.get("rows", {}).get("updates") == 0 for r in runs
                   if r["clients"] == clients and r["mode"] == "off")
    value = ratio(logging["round_seconds"], off["round_seconds"])
    return {"ratio": value, "ratio_of_minima": ratio(logging["round_seconds"],
                                                     off["round_seconds"], "min"),
            "aim": AIM, "meets_aim": value <= AIM, "audit_off_honoured": honoured}


def _plan(quick: bool, smoke: bool = False) -> list[tuple[int, str, int]]:
    """``(clients, mode, rounds)`` of every run, in order: off and logging alternate, so that
    a change of machine load falls on both. ``smoke``: one run of 2 clients and 2 rounds in the
    mode that does the most (attacks), which starts Ray once."""
    if smoke:
        return [(2, "attacks", 2)]
    pairs, rounds = (1, 3) if quick else (3, 6)
    plan = [(c, m, rounds) for _ in range(pairs) for c in (10, 50) for m in ("off", "logging")]
    plan.append((10, "attacks", rounds))
    return plan if quick else [*plan, (50, "attacks", rounds), (100, "logging", 4)]


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """Every run of the plan, pooled per setting; audit overhead ratios; scaling table
    (``smoke``: one small run, :func:`_plan`, 5 attack iterations: it measures nothing)."""
    runs = []
    for clients, mode, rounds in _plan(quick, smoke):
        iterations = 5 if smoke else 50 if quick else 100
        runs.append(simulate_once(clients, mode, rounds, iterations,
                                  extra=SMOKE_SETS if smoke else ()))
        print(f"[simulation] {clients} clients, {mode}: "
              f"{(runs[-1].get('round_seconds') or {}).get('median')} s/round",
              file=sys.stderr, flush=True)
    settings = dict.fromkeys(f"{r['clients']}/{r['mode']}" for r in runs)
    pooled = {key: _pooled([r for r in runs if f"{r['clients']}/{r['mode']}" == key])
              for key in settings}
    return {
        "preset": PRESET,
        "runs": runs,
        "pooled": pooled,
        "audit_overhead": {f"{c}_clients": _overhead(pooled, runs, c) for c in (10, 50)},
        "scaling_logging": [v for k, v in pooled.items() if v and k.endswith("/logging")],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and runs")
    parser.add_argument("--smoke", action="store_true", help="one small run: runs, no timing")
    args = parser.parse_args()
    print(json.dumps(measure(args.quick, smoke=args.smoke)))
