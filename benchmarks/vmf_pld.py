"""VMF PLD at any κ (issue #16): the grid chosen, its size, its cost and ε against RDP.

For κ = 100, 500, 2,000 and 10,000 at the paper settings (p = 13,700, q = 0.0021333,
T = 1,407, δ = 1.6667e-5): the value discretisation Δ the PLD chose
(``fedpriv.accounting.pld_grid``), the single-release and composed grid points (the larger
direction), the seconds to build the PLD, compose it T times and read ε (one run per κ, each κ
a fresh law: nothing cached helps), the peak of traced memory, ε from the PLD and from RDP
(``vmf_rdp`` + ``subsampled_rdp`` + ``rdp_to_epsilon``, the route the RDP accountant uses
besides approach 1). Before this section's code, κ = 500 and 2,000 were refused (10.5 M and
85 M points at Δ = 1e-5) and the RDP bound was the only answer.

    python benchmarks/vmf_pld.py            # one JSON object on stdout
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

P, Q, T, DELTA = 13_700, 0.0021333, 1407, 1.6667e-5
KAPPAS = (100.0, 500.0, 2000.0, 10_000.0)

__all__ = ["KAPPAS", "measure"]


def _rdp_epsilon(kappa: float, steps: int) -> float:
    import numpy as np

    from fedpriv.accounting.conversion import DEFAULT_ORDERS, rdp_to_epsilon
    from fedpriv.accounting.rdp import vmf_rdp
    from fedpriv.accounting.subsampling import subsampled_rdp

    orders = np.array(DEFAULT_ORDERS)
    curve = subsampled_rdp(orders, lambda a: vmf_rdp(a, kappa, P), Q)
    return float(rdp_to_epsilon(orders, steps * curve, DELTA).epsilon)


def _row(kappa: float, steps: int = T) -> dict[str, Any]:
    from fedpriv.accounting.pld_grid import choose_discretization, composed_width
    from fedpriv.accounting.vmf_pld import DEFAULT_DISCRETIZATION, vmf_grid_need, vmf_pld

    tracemalloc.start()
    start = time.perf_counter()
    need = vmf_grid_need(kappa, P, Q, steps)
    step = choose_discretization([need], DEFAULT_DISCRETIZATION)
    pld = vmf_pld(kappa, P, Q, steps=steps)
    built = time.perf_counter()
    composed = pld.self_compose(steps)
    composed_at = time.perf_counter()
    eps = float(composed.get_epsilon_for_delta(DELTA))
    done = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "kappa": kappa,
        "discretization": step,
        "single_points": round(need.single_width / step) + 1,
        "composed_points": round(max(composed_width(law, steps) for law in need.laws) / step)
        + 1,
        "seconds": round(done - start, 2),
        "build_s": round(built - start, 2),
        "compose_s": round(composed_at - built, 2),
        "epsilon_s": round(done - composed_at, 2),
        "peak_traced_mib": round(peak / 2**20),
        "epsilon_pld": eps,
        "epsilon_rdp": _rdp_epsilon(kappa, steps),
    }


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """One row per κ (``quick`` changes nothing: each κ is measured once; ``smoke``: κ = 10 at
    T = 10, a grid of a few thousand points, which runs the code and measures nothing)."""
    import dp_accounting  # noqa: F401  (its import, about a second, is not part of the timings)

    steps, kappas = (10, (10.0,)) if smoke else (T, KAPPAS)
    return {"settings": {"dim": P, "sample_rate": Q, "steps": steps, "delta": DELTA},
            "rows": [_row(kappa, steps) for kappa in kappas]}


if __name__ == "__main__":
    print(json.dumps(measure()))
