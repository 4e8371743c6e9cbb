"""What ``report.html`` costs: render time and size by number of clients, and what the page
would add to the report rebuilt after every round.

``python -m benchmarks.html_report [--quick]`` prints one JSON object:

* ``render``: :func:`fedpriv.audit.html_report.render_report_html` on synthetic completed
  runs of 10, 100 and 1,000 clients over 10 rounds (ε, log Bayes capacity, MBP estimates,
  every optional field: verification, ε lower bound, budget, PAC), with 60 attacks drawn
  (8 pairs of 16×16 images each) — seconds (median of repeats) and page bytes;
* ``per_round``: :func:`fedpriv.audit.write_report` on a real store shaped like the
  quickstart's (10 clients, 3 rounds of tallies) as the run rebuilds it after each round
  (no page) and with the page.

The aim (issue 19): a 1,000-client page under 5 MB rendered in under 5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks.timing import summarize, time_calls

__all__ = ["measure", "per_round_seconds", "render_costs", "synthetic_run"]


def _per_round(rnd: int, eps: float, rng: np.random.Generator) -> dict[str, Any]:
    return {
        "round": rnd, "update_status": "ok", "epsilon": eps, "log_capacity_round": 2336.0,
        "log_capacity_cumulative": 2336.0 * rnd, "mbp_bound": math.inf, "abp_bound": math.inf,
        "mbp_estimate": float(rng.uniform()), "abp_estimate": float(rng.uniform(0, 0.1)),
        "ssim": float(rng.uniform()),
        "verification": {"status": str(rng.choice(["consistent", "inconsistent"])),
                         "reason": "norm sandwich", "p_value": float(rng.uniform())},
        "epsilon_lower": {"value": eps / 3, "confidence": 0.95, "method": "canaries"},
    }  # fmt: skip


def synthetic_run(clients: int, rounds: int, drawn: int, seed: int = 0) -> tuple[dict, list]:
    """A report object and attack views of a completed run (module docstring)."""
    from fedpriv.audit.gallery import AttackView, strip_png
    from fedpriv.audit.pairing import REMATCHED, Pairing

    rng = np.random.default_rng(seed)
    eps = np.cumsum(rng.uniform(0.5, 3.0, size=(clients, rounds)), axis=1)
    entries = []
    for c in range(clients):
        per_round = [_per_round(r + 1, float(eps[c, r]), rng) for r in range(rounds)]
        entries.append({
            "client_id": c, "mechanism": "gaussian",
            "mechanism_params": {"clip": 1.0, "noise_multiplier": 1.0}, "guarantee": "verified",
            "rounds_participated": rounds, "epsilon": float(eps[c, -1]), "delta": 1e-5,
            "accountant": "rdp", "route": "rdp", "optimal_order": 2.4, "compose": "per-step",
            "releases": 20 * rounds, "log_bayes_capacity": 2336.0 * rounds,
            "threat_model": "record", "mbp_bound": math.inf, "abp_bound": math.inf,
            "mbp_estimate": 1.0, "abp_estimate": 0.1, "attack": {"ssim": 0.5},
            "verification": per_round[-1]["verification"],
            "epsilon_lower": per_round[-1]["epsilon_lower"], "pac_accuracy": 0.9,
            "pac_robust_confidence": 0.8, "budget": {"epsilon_budget": 10.0,
                                                     "exhausted_round": None},
            "failures": [], "per_round": per_round,
        })  # fmt: skip
    report = {
        "run_dir": "/runs/bench", "run_id": "bench", "status": "completed", "error": None,
        "fedpriv_version": "0.1.0", "seed": seed, "rounds": rounds,
        "completed_rounds": list(range(1, rounds + 1)), "incomplete_rounds": [],
        "accuracy": np.linspace(0.1, 0.9, rounds).tolist(),
        "loss": np.linspace(2.3, 0.3, rounds).tolist(), "clients": entries, "failures": [],
        "wall_seconds": 100.0, "config": {"rounds": rounds},
    }  # fmt: skip
    images = rng.uniform(size=(8, 16, 16))
    pairing = Pairing(images, np.clip(images + rng.normal(0, 0.1, images.shape), 0, 1),
                      REMATCHED, "bench")  # fmt: skip
    views = [AttackView(1 + k % rounds, k, "iga", {"mse": 0.01, "psnr": 20.0, "ssim": 0.8},
                        strip_png(pairing), REMATCHED, "bench", 8, True)
             for k in range(min(drawn, clients))]  # fmt: skip
    return report, views


def render_costs(clients: int, repeats: int) -> dict[str, Any]:
    """Seconds and bytes of one page."""
    from fedpriv.audit.html_report import render_report_html

    report, views = synthetic_run(clients, rounds=10, drawn=60)
    pages: list[str] = []
    samples = time_calls(lambda _: pages.append(render_report_html(report, views)), repeats)
    size = len(pages[-1].encode())
    return {"seconds": summarize(samples), "bytes": size, "under_5_MB": size < 5 * 2**20}


def per_round_seconds(repeats: int) -> dict[str, Any]:
    """write_report on a quickstart-shaped store, without the page (as after each round of a
    running run) and with it."""
    from fedpriv.audit import AuditStore, write_report

    with tempfile.TemporaryDirectory() as tmp, AuditStore.create(tmp, {"rounds": 3}, 0) as s:
        for rnd in (1, 2, 3):
            s.begin_round(rnd)
            for c in range(10):
                s.write_update(rnd, c, [np.zeros(4)], {"mechanism": "gaussian", "local_steps": 20})
                s.write_tally(rnd, c, {"epsilon": 4.0 * rnd, "delta": 1e-5,
                                       "log_capacity_cumulative": 2336.0 * rnd})  # fmt: skip
            s.complete_round(rnd, {"accuracy": 0.3 * rnd, "loss": 2.0 / rnd})
        return {
            mode: summarize(time_calls(lambda _, h=html: write_report(s, html=h), repeats))
            for mode, html in (("without_page", False), ("with_page", True))
        }


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """Every measurement of the module docstring (``smoke``: one page of 10 clients, one call
    each: it runs, it measures nothing)."""
    repeats = 1 if smoke else 2 if quick else 5
    return {
        "render": {str(n): render_costs(n, repeats) for n in ((10,) if smoke else (10, 100, 1000))},
        "per_round": per_round_seconds(repeats),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    start = time.perf_counter()
    result = measure(parser.parse_args().quick)
    result["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result, indent=2))
