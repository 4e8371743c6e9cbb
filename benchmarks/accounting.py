"""Accounting benchmarks: speed of ``fedpriv account`` and RDP-vs-PLD ε at the paper settings.

Prints one JSON object. Paper settings: p = 13,700, q = 128/60000, T = 1,407, δ = 1/60000.
Timings are wall-clock medians of ``--repeat`` runs (noisy on a shared machine); each timed
in-process call uses a fresh parameter value so that no cache helps it.

    python benchmarks/accounting.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

P, Q, T, DELTA = 13_700, 128 / 60000, 1407, 1 / 60000
KAPPAS = (10.0, 30.0, 58.6, 100.0)


def _median_time(fn: Callable[[int], Any], repeat: int) -> float:
    times = []
    for i in range(repeat):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cli_vmf_seconds(repeat: int) -> dict[str, float]:
    """``fedpriv account`` for VMF at p = 13,700, T = 1e5 (RDP route best), as a subprocess."""
    argv = [sys.executable, "-m", "fedpriv", "account", "--mechanism", "vmf", "--kappa", "58.6",
            "--dim", str(P), "--sample-rate", str(Q), "--steps", "100000",
            "--delta", str(DELTA), "--json"]
    wall = _median_time(lambda _: subprocess.run(argv, check=True, capture_output=True), repeat)
    from fedpriv.commands.account import account

    compute = _median_time(lambda i: account("vmf", kappa=58.6 + 1e-6 * i, dim=P,
                                             sample_rate=Q, steps=100_000, delta=DELTA), repeat)
    return {"cli_wall_s": wall, "in_process_compute_s": compute}


def vmf_rdp_vs_pld(kappas: tuple[float, ...]) -> list[dict[str, float]]:
    """ε of both accountants at the paper settings, with the PLD build and compose times."""
    from fedpriv.accounting.accountant import epsilon
    from fedpriv.accounting.events import ReleaseEvent
    from fedpriv.accounting.vmf_pld import vmf_pld
    from fedpriv.mechanisms import make_release

    rows = []
    for kappa in kappas:
        events = [ReleaseEvent(make_release("vmf", kappa, P), Q, T)]
        rdp = epsilon(events, DELTA)
        start = time.perf_counter()
        pld = vmf_pld(kappa, P, Q)
        built = time.perf_counter()
        eps_pld = pld.self_compose(T).get_epsilon_for_delta(DELTA)
        done = time.perf_counter()
        rows.append({"kappa": kappa, "epsilon_rdp": rdp.epsilon, "rdp_route": rdp.route,
                     "rdp_routes": dict(rdp.routes), "epsilon_pld": float(eps_pld),
                     "rdp_over_pld": rdp.epsilon / float(eps_pld),
                     "pld_build_s": built - start, "pld_compose_s": done - built})
    return rows


def gaussian_reference() -> dict[str, float]:
    """σ = 1.23 at the paper settings: RDP and PLD ε (dp-accounting) and their times."""
    import dp_accounting  # noqa: F401  (import cost excluded from the timings)

    from fedpriv.accounting.accountant import epsilon
    from fedpriv.accounting.events import ReleaseEvent
    from fedpriv.mechanisms import make_release

    events = [ReleaseEvent(make_release("gaussian", 1.23), Q, T)]
    out = {}
    for kind in ("rdp", "pld"):
        start = time.perf_counter()
        out[f"epsilon_{kind}"] = epsilon(events, DELTA, accountant=kind, route="rdp").epsilon
        out[f"{kind}_s"] = time.perf_counter() - start
    return out


def calibration_seconds(quick: bool) -> dict[str, Any]:
    """Calibrating to ε = 1 at the paper settings."""
    from fedpriv.accounting.calibrate import calibrate
    from fedpriv.mechanisms import release_class

    cases = [("vmf", "rdp"), ("gaussian", "rdp"), ("laplace", "rdp")]
    cases += [] if quick else [("vmf", "pld"), ("gaussian", "pld")]
    out = {}
    for mechanism, kind in cases:
        start = time.perf_counter()
        template = release_class(mechanism).calibration_start(P)
        cal = calibrate(template, 1.0, delta=DELTA, sample_rate=Q, steps=T, accountant=kind)
        out[f"{mechanism}_{kind}"] = {cal.parameter_name: cal.parameter,
                                      "epsilon": cal.result.epsilon,
                                      "evaluations": cal.evaluations,
                                      "seconds": time.perf_counter() - start}
    return out


def ledger_seconds(clients: int = 100, rounds: int = 50) -> dict[str, float]:
    """ClientAccountant (RDP, best route): record + ε for every client every round."""
    from fedpriv.accounting.accountant import ClientAccountant
    from fedpriv.mechanisms import make_release

    release = make_release("vmf", 58.6, P)
    ledgers = [ClientAccountant() for _ in range(clients)]
    start = time.perf_counter()
    for _ in range(rounds):
        for acc in ledgers:
            acc.record(release, sample_rate=Q, steps=10)
            acc.epsilon(DELTA)
    total = time.perf_counter() - start
    return {"clients": clients, "rounds": rounds, "seconds_per_round": total / rounds}


def budget_check_seconds(rounds: int = 10) -> dict[str, Any]:
    """What a client with an ε budget pays before each round (``fedpriv.budget.check_budget``)
    at the quickstart settings (σ = 1, q = 32/143, 20 steps a round, δ = 1e-5): each round a
    new release count, so no composition is cached; the first RDP check pays dp-accounting's
    import."""
    from fedpriv.budget import check_budget
    from fedpriv.mechanisms import make_release

    out: dict[str, Any] = {}
    for kind in ("rdp", "pld"):
        release = make_release("gaussian", 1.0)
        times = []
        for r in range(rounds):
            start = time.perf_counter()
            check_budget(1e9, release, sample_rate=32 / 143, released=20 * r, steps=20,
                         delta=1e-5, accountant=kind)
            times.append(time.perf_counter() - start)
        out[kind] = {"median_s": statistics.median(times), "max_s": max(times),
                     "rounds": rounds}
    return out


def main(quick: bool = False, repeat: int = 5) -> dict[str, Any]:
    """All measurements as one JSON-ready object."""
    return {
        "settings": {"dim": P, "sample_rate": Q, "steps": T, "delta": DELTA},
        "cli_vmf_T1e5_rdp": cli_vmf_seconds(repeat),
        "gaussian_sigma_1_23": gaussian_reference(),
        "vmf_rdp_vs_pld": vmf_rdp_vs_pld(KAPPAS[:3] if quick else KAPPAS),
        "calibration_to_epsilon_1": calibration_seconds(quick),
        "client_ledger": ledger_seconds(),
        "client_budget_check": budget_check_seconds(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the slowest PLD cases")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="accepted for symmetry; always JSON")
    opts = parser.parse_args()
    print(json.dumps(main(opts.quick, opts.repeat)))
