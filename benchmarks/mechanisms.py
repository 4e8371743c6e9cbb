"""Time one VMF draw and one privatize() call per mechanism at the paper MLP's size.

``python benchmarks/mechanisms.py [--quick] [--threads N]`` prints one JSON object: the median
wall time in milliseconds of a VMF draw (p = 13,700; κ = 100 and 10⁴) and of one
``privatize`` call per mechanism (batch 128, p = 13,700, float32, CPU), each over
``repeats`` timed runs after one warm-up run.
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

    from fedpriv.mechanisms import MECHANISMS, build_mechanism, make_generator
    from fedpriv.special.vmf_sampler import sample_vmf

    torch.set_num_threads(threads)
    generator = make_generator(0, 0, 0)
    mean = torch.randn(DIM, generator=generator)
    mean /= mean.norm()
    draws = {
        f"kappa={kappa:g}": _median_ms(lambda k=kappa: sample_vmf(mean, k, generator), repeats)
        for kappa in (100.0, 1e4)
    }
    grads = torch.randn(BATCH, DIM, generator=generator)
    calls = {}
    for name in MECHANISMS:
        mech = build_mechanism(name, {})
        calls[name] = _median_ms(
            lambda m=mech: m.privatize(grads, generator, batch_size=float(BATCH)), repeats
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 repeats instead of 50")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    print(json.dumps(measure(20 if args.quick else 50, args.threads)))


if __name__ == "__main__":
    main()
