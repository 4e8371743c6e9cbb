"""Cost of the leakage measures: Bayes capacity at p = 13,700 and 10⁷, ``fedpriv compare``.

``python -m benchmarks.leakage [--quick]`` prints one JSON object:

* ``capacity``: ``log C`` per mechanism (Gaussian s = 1, Laplace b = 1, VMF κ = 100; record
  level r = 1) and the time of one library call in ms (median of ``repeats``);
* ``vmf_tradeoff_cold_ms``: one single-release VMF trade-off curve from scratch (cache cleared);
* ``compare``: the library call behind ``fedpriv compare`` for the example specs, wall and
  process-CPU seconds (each spec's curve is computed afresh; no plot).

Timings are wall clock on a shared machine: read the median with its spread.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from benchmarks.timing import summarize, time_calls, timed  # noqa: E402

__all__ = ["COMPARE_EXAMPLES", "DIMS", "leakage_costs"]

DIMS = (13_700, 10_000_000)
COMPARE_EXAMPLES = (
    ("gaussian:mu=1", "laplace:mu=1"),
    ("vmf:kappa=100,dim=13700", "gaussian:mu=1.7"),
    ("subsampled-gaussian:sigma=1,q=0.01,steps=500", "subsampled-laplace:scale=1,q=0.01,steps=500"),
)


def _capacity(repeats: int) -> dict[str, Any]:
    from fedpriv.leakage import capacity

    calls = {
        "gaussian": lambda p, i: capacity.log_capacity_gaussian(p, 1.0, 1.0 + 1e-9 * i),
        "laplace": lambda p, i: capacity.log_capacity_laplace(p, 1.0, 1.0 + 1e-9 * i),
        "vmf": lambda p, i: capacity.log_capacity_vmf(p, 100.0 + 1e-9 * i),
    }
    rows = {}
    for dim in DIMS:
        for name, call in calls.items():
            samples = time_calls(lambda i, c=call, d=dim: c(d, i), repeats, warmup=1)
            rows[f"{name}_p{dim}"] = {"log_capacity": call(dim, 0), "ms": summarize(samples, 1e3)}
    return rows


def _vmf_cold(repeats: int) -> dict[str, Any]:
    from fedpriv.leakage import vmf_curve

    def cold() -> None:
        vmf_curve._curve.cache_clear()  # noqa: SLF001 - a cold start is what is measured
        vmf_curve.vmf_tradeoff(0.5, 100.0, 13_700)

    return timed(cold, repeats)


def _compare(repeats: int, examples: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    from fedpriv.commands.compare import compare_specs
    from fedpriv.leakage import vmf_curve

    rows = {}
    for a, b in examples:
        wall, cpu = [], []
        for _ in range(repeats):
            vmf_curve._curve.cache_clear()  # noqa: SLF001 - every run starts cold
            start, start_cpu = time.perf_counter(), time.process_time()
            compare_specs(a, b)
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        rows[f"{a} vs {b}"] = {
            "wall_s": summarize(wall, digits=3),
            "cpu_s": summarize(cpu, digits=3),
        }
    return rows


def leakage_costs(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """The measurements described in the module docstring (``smoke``: one call each, the first
    ``compare`` example only: it runs, it measures nothing)."""
    repeats = 1 if smoke else 3 if quick else 15
    return {
        "threat_model": "record (r = C = 1)",
        "capacity": _capacity(repeats),
        "vmf_tradeoff_cold_ms": _vmf_cold(repeats),
        "compare": _compare(1 if quick or smoke else 3,
                            COMPARE_EXAMPLES[:1] if smoke else COMPARE_EXAMPLES),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    print(json.dumps(leakage_costs(parser.parse_args().quick)))
