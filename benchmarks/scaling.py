"""Seconds per round from 10 to 10,000 clients, in process and on Ray, and where a round goes.

``python -m benchmarks.scaling [--quick]`` prints one JSON object. The workload is the one of
issue #16: the paper MLP on Fashion-MNIST (from ``/usr/share/datasets/fashion-mnist``, unpacked
once into a cache; the scikit-learn digits, up to 1,000 clients, where it is absent), batch 16,
one local step, Gaussian σ = 1, IID partition. Every run is a subprocess whose process tree is
watched for memory (:mod:`benchmarks.proctree`):

* **in process** — :func:`strategies.server_run.run_federation` on the test suite's
  ``LocalGrid`` (the real ServerApp body; each ClientApp call in the same thread, no Ray), with
  a stack sampler (:mod:`benchmarks.stack_sampler`) charging every 2 ms of CPU of rounds 2…R to the
  local DP step, Flower, fedpriv's own code (store, attacks, the rest), the server's
  evaluation or the grid;
* **Ray** — ``fedpriv simulate`` (:func:`benchmarks.simulation.simulate_once`), 2 Ray CPUs.

Modes: ``off`` (``audit.enabled = false``), ``audit`` (auditing on: every reply checked,
tallied and recorded; ``audit.store_updates = "attacked"`` with no attack, so no update arrays),
``audit+iga`` (the same with IGA, 50 iterations, on client 0 every round: its update and true
batch are stored) and ``all`` (every update stored, float32). Seconds per round are the spacing
of the ``completed`` timestamps of rounds 2…R in the store (start-up and round 1 excluded); in
process also ``round_cpu_seconds``, the process's CPU time over the same spacing, which other
jobs on a shared machine do not inflate (the in-process run uses one thread);
``bytes_per_round`` is the store's tensors and database after the run over its rounds.
"""

from __future__ import annotations

import argparse
import gzip
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

__all__ = ["MODES", "data_sets", "inprocess_once", "measure", "ray_once"]

ROOT = Path(__file__).resolve().parent.parent
PRESET = ROOT / "configs" / "quickstart.toml"
FASHION = Path("/usr/share/datasets/fashion-mnist")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fedpriv-bench"
WORKLOAD = ["train.batch_size=16", "train.local_steps=1", "mechanism.name='gaussian'",
            "mechanism.noise_multiplier=1.0", "data.partition='iid'"]  # fmt: skip
MODES = {
    "off": ["audit.enabled=false"],
    "audit": ["audit.store_updates='attacked'", "audit.attacks=[]"],
    "audit+iga": ["audit.store_updates='attacked'", "audit.attacks=['iga']",
                  "audit.clients=[0]", "audit.every=1", "audit.iterations=50"],
    "all": ["audit.store_updates='all'", "audit.attacks=[]"],
}  # fmt: skip


def data_sets() -> list[str]:
    """``--set`` keys of the data: Fashion-MNIST unpacked into the cache, else the digits."""
    if not FASHION.is_dir():
        return ["data.name='digits'"]
    raw = CACHE / "data" / "FashionMNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for packed in FASHION.glob("*-ubyte.gz"):
        target = raw / packed.name[: -len(".gz")]
        if not target.is_file():
            with gzip.open(packed) as src, open(f"{target}.part", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(f"{target}.part", target)
    return ["data.name='fashion-mnist'", f"data.root='{CACHE / 'data'}'"]


def _sets(clients: int, rounds: int, mode: str, data: Sequence[str] | None = None) -> list[str]:
    return [*WORKLOAD, *(data_sets() if data is None else data), f"data.num_clients={clients}",
            f"rounds={rounds}", *MODES[mode]]


def _round_facts(run_dir: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{run_dir / 'audit.sqlite'}?mode=ro", uri=True) as conn:
        done = [r[0] for r in conn.execute(
            "SELECT completed FROM rounds WHERE status = 'completed' ORDER BY round")]
    spacing = [b - a for a, b in zip(done, done[1:], strict=False)]
    report = json.loads((run_dir / "report.json").read_text())
    storage = report["storage"]
    written = storage["bytes"]["total"] + storage["database_bytes"]
    return {
        "round_spacings": [round(x, 3) for x in spacing],
        "round_seconds": summarize(spacing, digits=3) if spacing else None,
        "bytes_per_round": round(written / max(report["rounds"], 1)),
        "storage": storage,
    }


# -- in process ------------------------------------------------------------------------------


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """The in-process run (in the subprocess): run the federation, sample rounds 2…R."""
    import logging

    import torch

    from benchmarks.stack_sampler import StackSampler
    from clients.client_app import app
    from strategies.pipeline import AuditPipeline
    from strategies.server_run import run_federation
    from workflows.config import load_config
    from workflows.local_grid import LocalGrid

    torch.set_num_threads(1)
    for name in ("absl", "flwr"):
        logging.getLogger(name).setLevel(logging.ERROR)
    cfg = load_config(PRESET, spec["sets"])
    sampler = StackSampler()
    begin, end = AuditPipeline.begin_round, AuditPipeline.end_round

    def begin_round(self: AuditPipeline, rnd: int, broadcast: Any) -> None:
        if rnd == 2:
            sampler.active = True
        begin(self, rnd, broadcast)

    def end_round(self: AuditPipeline, rnd: int, accuracy: float, loss: float) -> None:
        end(self, rnd, accuracy, loss)
        cpu.append(time.process_time())
        if rnd == cfg.rounds:
            sampler.active = False

    AuditPipeline.begin_round, AuditPipeline.end_round = begin_round, end_round  # type: ignore[method-assign]
    cpu: list[float] = []
    sampler.start()
    run_federation(LocalGrid(app, cfg.data.num_clients), cfg, Path(spec["run_dir"]))
    sampler.stop()
    cpu_spacing = [b - a for a, b in zip(cpu, cpu[1:], strict=False)]
    return {**_round_facts(Path(spec["run_dir"])), "shares": sampler.shares(),
            "round_cpu_seconds": summarize(cpu_spacing, digits=3) if cpu_spacing else None,
            "round_cpu_spacings": [round(x, 4) for x in cpu_spacing]}


def _per_client_ms(row: dict[str, Any]) -> dict[str, float] | None:
    """CPU milliseconds per client and round charged to each owner (sampled shares × the
    round's CPU time)."""
    if not row.get("round_cpu_seconds"):
        return None
    per_client = 1e3 * row["round_cpu_seconds"]["median"] / row["clients"]
    out = {owner: round(share * per_client, 3) for owner, share in row["shares"].items()}
    out["fedpriv_total"] = round(sum(out[k] for k in ("fedpriv", "store", "attack",
                                                      "evaluation")), 3)
    out["beyond_dp_step"] = round(per_client - out["dp_step"], 3)
    return out


def inprocess_once(clients: int, mode: str, rounds: int, timeout: float = 3600.0,
                   data: Sequence[str] | None = None) -> dict[str, Any]:
    """One in-process run in a watched subprocess (``data``: the data's ``--set`` keys,
    default :func:`data_sets`); never raises."""
    work = Path(tempfile.mkdtemp(prefix=f"fedpriv-scaling-{clients}-"))
    spec = {"sets": _sets(clients, rounds, mode, data), "run_dir": str(work / "run")}
    row: dict[str, Any] = {"route": "in-process", "clients": clients, "mode": mode,
                           "rounds": rounds, "load_before": load_average()}
    argv = [sys.executable, "-m", "benchmarks.scaling", "--child", json.dumps(spec)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLWR_TELEMETRY_ENABLED": "0",
           "FLWR_DISABLE_UPDATE_CHECK": "1", "PYTHONPATH": str(ROOT)}
    try:
        out = run_json(argv, cwd=str(ROOT), env=env, work=work, row=row, timeout=timeout)
        if out is not None:
            row.update(out)
            row["per_client_ms"] = _per_client_ms(row)
    except Exception as exc:  # a benchmark reports, it does not fail
        row["error"] = repr(exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


# -- Ray ------------------------------------------------------------------------------------


def ray_once(clients: int, mode: str, rounds: int, timeout: float = 3600.0,
             more: Sequence[str] = ()) -> dict[str, Any]:
    """One ``fedpriv simulate`` run on Ray (:func:`benchmarks.simulation.simulate_once`;
    ``more``: further ``--set`` overrides, applied last)."""
    from benchmarks.simulation import simulate_once

    extra = [*WORKLOAD, *data_sets(), *MODES[mode], *more]
    row = simulate_once(clients, "logging", rounds, timeout=timeout, extra=extra)
    storage = row.get("storage")
    if storage:
        written = storage["bytes"]["total"] + storage["database_bytes"]
        row["bytes_per_round"] = round(written / rounds)
    return {**row, "route": "ray", "mode": mode}


# -- the local DP step alone ----------------------------------------------------------------


def dp_step_ms(repeats: int = 300) -> dict[str, Any]:
    """One client's local DP step (``local_train``: 60 records, batch 16, one step, Gaussian),
    timed alone: the reference the per-client costs are compared with."""
    import torch

    from benchmarks.timing import time_calls
    from fedpriv.mechanisms import build_mechanism, make_generator
    from fedpriv.models import build_model
    from fedpriv.training import local_train

    torch.set_num_threads(1)
    x, y = torch.rand(60, 1, 16, 16), torch.randint(0, 10, (60,))
    model = build_model("paper-mlp", (1, 16, 16))
    mechanism = build_mechanism("gaussian", {"noise_multiplier": 1.0})

    def step(i: int) -> None:
        local_train(model, x, y, mechanism, lr=0.1, local_steps=1, batch_size=16,
                    sampling="poisson", generator=make_generator(0, abs(i), 1),
                    record_ids=list(range(60)))

    return summarize(time_calls(step, repeats, warmup=20), scale=1e3)


# -- the plan -------------------------------------------------------------------------------


def _plan(quick: bool, fashion: bool, smoke: bool = False) -> list[tuple[str, int, str, int]]:
    """``(route, clients, mode, rounds)`` of every run, off and audit alternating (``smoke``:
    one run of 2 clients and 2 rounds per route, the in-process one with IGA)."""
    if smoke:
        return [("in-process", 2, "audit+iga", 2), ("ray", 2, "audit", 2)]
    pairs = 1 if quick else 2
    plan = [("in-process", c, m, 4) for _ in range(pairs) for c in (10, 1000)
            for m in ("off", "audit")]
    plan += [("in-process", 100, "audit", 4), ("in-process", 1000, "audit+iga", 4),
             ("in-process", 1000, "all", 3)]
    plan += [("ray", c, "audit", 3) for c in (10, 100, *(() if quick else (1000,)))]
    if not quick:
        plan += [("ray", 10, "off", 3), ("ray", 1000, "off", 3)]
        if fashion:
            plan.append(("in-process", 10_000, "audit+iga", 3))
    return plan


def _pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    spacings = [x for r in rows for x in r.get("round_spacings", [])]
    return {"runs": len(rows), "round_seconds": summarize(spacings, digits=3) if spacings
            else None, "peak_pss_mib": max((r.get("peak_pss_mib", 0) for r in rows), default=0)}


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """Every run of the plan; pooled settings, ratios against the targets (module docstring;
    ``smoke``: the smallest run per route and a few repeats, which measure nothing)."""
    from benchmarks.simulation import SMOKE_SETS
    from benchmarks.store_writes import measure as store_writes

    fashion = data_sets()[0] == "data.name='fashion-mnist'"
    runs = []
    for route, clients, mode, rounds in _plan(quick, fashion, smoke):
        if route == "in-process":
            runs.append(inprocess_once(clients, mode, rounds))
        else:
            runs.append(ray_once(clients, mode, rounds, more=SMOKE_SETS if smoke else ()))
        print(f"[scaling] {route} {clients} {mode}: "
              f"{(runs[-1].get('round_seconds') or {}).get('median')} s/round "
              f"{runs[-1].get('error', '')[-200:]}", file=sys.stderr, flush=True)
    keys = dict.fromkeys(f"{r['route']}/{r['clients']}/{r['mode']}" for r in runs)
    pooled = {k: _pooled([r for r in runs if f"{r['route']}/{r['clients']}/{r['mode']}" == k])
              for k in keys}

    def median(key: str) -> float | None:
        summary = pooled.get(key, {}).get("round_seconds")
        return summary["median"] if summary else None

    def over(a: str, b: str) -> float | None:
        x, y = pooled.get(a, {}).get("round_seconds"), pooled.get(b, {}).get("round_seconds")
        return ratio(x, y) if x and y else None

    return {
        "data": data_sets(), "workload": WORKLOAD, "modes": MODES,
        "dp_step_ms": dp_step_ms(2 if smoke else 100 if quick else 300),
        "store_writes": store_writes(clients=2, rounds=1) if smoke else store_writes(
            clients=100 if quick else 300),
        "runs": runs, "pooled": pooled,
        "targets": {
            "ratio_1000_over_100_in_process": over("in-process/1000/audit", "in-process/100/audit"),
            "round_1000_in_process_s": median("in-process/1000/audit+iga"),
            "round_1000_ray_s": median("ray/1000/audit"),
            "audit_overhead_10_in_process": over("in-process/10/audit", "in-process/10/off"),
            "audit_overhead_1000_in_process": over("in-process/1000/audit",
                                                   "in-process/1000/off"),
            "audit_overhead_1000_ray": over("ray/1000/audit", "ray/1000/off"),
            "peak_pss_mib_10000": pooled.get("in-process/10000/audit+iga", {}).get(
                "peak_pss_mib"),
        },
        "skipped": [] if fashion else ["10,000 clients: no Fashion-MNIST (digits hold 1,437)"],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, no 10,000 clients")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--only", metavar="ROUTE/CLIENTS/MODE/ROUNDS",
                        help="one run, e.g. in-process/100/audit/4 or ray/10/off/3")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
    elif args.only:
        route, clients, mode, rounds = args.only.split("/")
        once = inprocess_once if route == "in-process" else ray_once
        print(json.dumps(once(int(clients), mode, int(rounds))))
    else:
        print(json.dumps(measure(args.quick)))
