"""ε at δ per mechanism and accountant at p = 13,700 for T = 1,400 and T = 100,000 releases.

``python -m benchmarks.epsilon_table [--quick]`` prints one JSON object. Settings are the
paper's (q = 128/60000, δ = 1/60000, as in ``benchmarks/accounting.py``); noise σ = 1,
λ = 1 and κ = 58.6 (≈ √p/2: the VMF that behaves like a Gaussian with σ ≈ 1 at this p,
privacy-math.md §2). Each value comes from :func:`fedpriv.accounting.account` (the library
function behind ``fedpriv account``), timed over ``repeats`` calls whose parameter differs in
the 12th digit so that no cache helps; the dp-accounting import is excluded.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks.accounting import DELTA, P, Q
from benchmarks.timing import summarize, time_calls

__all__ = ["MECHANISMS", "epsilon_table"]

MECHANISMS = {"gaussian": ("noise_multiplier", 1.0), "laplace": ("laplace_scale", 1.0),
              "vmf": ("kappa", 58.6)}
STEPS = (1_400, 100_000)


def _one(mechanism: str, accountant: str, steps: int, repeats: int) -> dict[str, Any]:
    from fedpriv.commands.account import account

    key, value = MECHANISMS[mechanism]
    found: dict[str, Any] = {}

    def call(i: int) -> None:
        found.update(account(mechanism, sample_rate=Q, delta=DELTA, steps=steps,
                             dim=P if mechanism == "vmf" else None, accountant=accountant,
                             **{key: value * (1.0 + 1e-12 * (i + 2))}))

    seconds = time_calls(call, repeats, warmup=0)
    return {"epsilon": round(found["epsilon"], 5), "route": found["route"],
            "optimal_order": found["optimal_order"],
            "discretization": found["value_discretization"], key: value,
            "seconds": summarize(seconds)}


def epsilon_table(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """Rows ``{mechanism}_{accountant}_T{steps}``; see the module docstring (``smoke``: one
    call per row at T = 10 instead of the paper's T: it runs, it measures nothing)."""
    import dp_accounting  # noqa: F401  (import cost excluded)

    rows = {}
    for steps in (10,) if smoke else STEPS:
        for mechanism in MECHANISMS:
            for accountant in ("rdp", "pld"):
                repeats = (1 if quick else 3) if accountant == "pld" else (3 if quick else 5)
                repeats = 1 if smoke else repeats
                rows[f"{mechanism}_{accountant}_T{steps}"] = _one(
                    mechanism, accountant, steps, repeats)
    return {"settings": {"dim": P, "sample_rate": Q, "delta": DELTA,
                         "steps": [10] if smoke else list(STEPS)},
            "rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    print(json.dumps(epsilon_table(parser.parse_args().quick)))
