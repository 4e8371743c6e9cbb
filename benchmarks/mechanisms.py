"""Time one VMF draw and one privatize() call per mechanism at the paper MLP's size.

``python benchmarks/mechanisms.py [--quick] [--threads N]`` prints one JSON object: the median
wall time in milliseconds of a VMF draw (p = 13,700; κ = 100 and 10⁴) and of one
``privatize`` call per mechanism (batch 128, p = 13,700, float32, CPU), each over
``repeats`` timed runs after one warm-up run.

:func:`release_table` (used by ``benchmarks/run.py``) times one release per mechanism at
several model sizes, with median, quartiles and min/max.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

DIM, BATCH = 13_700, 128


def _median_ms(func: Callable[[], object], repeats: int) -> float:
    func()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def measure(repeats: int = 50, threads: int = 1) -> dict[str, object]:
    """Median timings (ms) of VMF draws and privatize calls; see the module docstring."""
    import torch

    from fedpriv.gradients import PerExampleGradients
    from fedpriv.mechanisms import build_mechanism, make_generator, mechanism_names
    from fedpriv.special.vmf_sampler import sample_vmf

    torch.set_num_threads(threads)
    generator = make_generator(0, 0, 0)
    mean = torch.randn(DIM, generator=generator)
    mean /= mean.norm()
    draws = {
        f"kappa={kappa:g}": _median_ms(lambda k=kappa: sample_vmf(mean, k, generator), repeats)
        for kappa in (100.0, 1e4)
    }
    source = PerExampleGradients(torch.randn(BATCH, DIM, generator=generator))
    calls = {}
    for name in mechanism_names():
        mech = build_mechanism(name, {})
        calls[name] = _median_ms(
            lambda m=mech: m.privatize(source, generator, batch_size=float(BATCH)), repeats
        )
    return {
        "vmf_draw_ms": draws,
        "privatize_ms": calls,
        "dim": DIM,
        "batch": BATCH,
        "repeats": repeats,
        "threads": threads,
        "torch": torch.__version__,
    }


def _release_calls(dim: int, batch: int) -> dict[str, Callable[[], object]]:
    """One ``privatize`` per mechanism on random ``(batch, dim)`` gradients, and a VMF draw."""
    import torch

    from fedpriv.gradients import PerExampleGradients
    from fedpriv.mechanisms import build_mechanism, make_generator, mechanism_names
    from fedpriv.special.vmf_sampler import sample_vmf

    generator = make_generator(0, 0, 0)
    grads = torch.randn(batch, dim, generator=generator)
    source = PerExampleGradients(grads)
    mean = grads.sum(0) / grads.sum(0).norm()

    def release(name: str) -> Callable[[], object]:
        mech = build_mechanism(name, {})
        return lambda: mech.privatize(source, generator, batch_size=float(batch))

    calls = {name: release(name) for name in mechanism_names()}
    calls["vmf_draw_only"] = lambda: sample_vmf(mean, 100.0, generator)
    return calls


def release_table(
    sizes: tuple[tuple[int, int], ...] = ((DIM, BATCH), (1_000_000, 16)), repeats: int = 20
) -> dict[str, dict[str, object]]:
    """One ``privatize`` per mechanism (default parameters), and one VMF draw alone (κ = 100),
    per ``(p, batch)`` in ``sizes``.

    Times in milliseconds (median, IQR, min/max over ``repeats`` round-robin runs, one torch
    thread). The batch is smaller at large ``p`` to keep the ``(B, p)`` matrix in memory.
    """
    import torch

    from benchmarks.timing import timed_interleaved

    torch.set_num_threads(1)
    return {
        f"p={dim}": {"batch": batch, "ms": timed_interleaved(_release_calls(dim, batch), repeats)}
        for dim, batch in sizes
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 repeats instead of 50")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    print(json.dumps(measure(20 if args.quick else 50, args.threads)))


if __name__ == "__main__":
    main()
