"""Timing helpers shared by the benchmark sections: repeated wall-clock runs and summaries.

Every timing is a list of wall-clock samples summarised as median, interquartile range and
min/max (:func:`summarize`); the median is the headline, the spread says how noisy the
machine was.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ratio", "summarize", "time_calls", "timed", "timed_in_runs", "timed_interleaved"]


def summarize(samples: Sequence[float], scale: float = 1.0, digits: int = 4) -> dict[str, Any]:
    """Median, quartiles, min and max of ``samples`` (each multiplied by ``scale``)."""
    values = sorted(scale * s for s in samples)
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return {
        "median": round(statistics.median(values), digits),
        "iqr": [round(q1, digits), round(q3, digits)],
        "min": round(values[0], digits),
        "max": round(values[-1], digits),
        "n": len(values),
    }


def time_calls(fn: Callable[[int], Any], repeats: int, warmup: int = 1) -> list[float]:
    """Wall-clock seconds of ``fn(i)`` for ``i = 0 … repeats−1`` after ``warmup`` untimed calls
    (``fn(-1)``, ``fn(-2)``, …)."""
    for k in range(warmup):
        fn(-1 - k)
    samples = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return samples


def timed(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> dict[str, Any]:
    """:func:`summarize` in milliseconds of ``repeats`` calls of ``fn()`` after a warm-up."""
    return summarize(time_calls(lambda _: fn(), repeats, warmup), scale=1e3)


def ratio(numerator: dict[str, Any], denominator: dict[str, Any], key: str = "median") -> float:
    """Ratio of two summaries' medians (or of another statistic, e.g. ``"min"``)."""
    return round(numerator[key] / denominator[key], 3)


def timed_interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1
) -> dict[str, dict[str, Any]]:
    """Like :func:`timed` for several functions, run round-robin (``a, b, c, a, b, c, …``) so
    that a change in machine load during the measurement affects all of them alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: summarize(s, scale=1e3) for name, s in samples.items()}


def timed_in_runs(
    fns: dict[str, Callable[[], Any]], repeats: int, run_length: int = 10, warmup: int = 1
) -> dict[str, dict[str, Any]]:
    """Like :func:`timed_interleaved`, but each function runs ``run_length`` times in a row
    before the next one takes over (``a a a … b b b … a a a …``) until each has run
    ``repeats`` timed calls: a drift of the machine's load still reaches all of them alike,
    and each call starts, as in a loop of its own, from the caches and branch history its
    previous call left, not from another function's."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    while any(len(s) < repeats for s in samples.values()):
        for name, fn in fns.items():
            for _ in range(min(run_length, repeats - len(samples[name]))):
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
    return {name: summarize(s, scale=1e3) for name, s in samples.items()}
