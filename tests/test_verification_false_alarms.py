"""False-alarm rates of the server-side tests (privacy-math.md §9) by Monte Carlo.

Each test runs at α = 0.01 against honest updates with the worst signals the declaration
allows: none (the low side's worst case), every clipped gradient aligned with B at its bound
(the high side's), and for k > 1 signals that follow the noise of the earlier steps so as to
cancel or reinforce it (what the triangle bounds must absorb). Rejection regions are found
through the test functions themselves (bisection on the observed norm; a test's region is
``{x < lo} ∪ {x > hi}``), checked against direct calls, then applied to DRAWS draws.

Every assertion ``rejections ≤ LIMIT`` fails with probability ≤ 1e-9 when the true rate is
at most α (LIMIT is the 1 − 1e-9 quantile of Binomial(DRAWS, α)); a rate above ≈ 1.3α fails it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from fedpriv.verification import (
    Verdict,
    check_batch_sizes,
    clip_norm_test,
    gaussian_norm_test,
    gaussian_shape_test,
    laplace_norm_test,
    laplace_shape_test,
    record_count,
)

ALPHA = 0.01
DRAWS = 40_000
LIMIT = int(stats.binom.isf(1e-9, DRAWS, ALPHA))
DIM, PER_STEP, STEPS = 120, 10, 3
KNOWN_1 = record_count(1, batch_sizes=[3 * PER_STEP])
KNOWN_3 = record_count(STEPS, batch_sizes=[PER_STEP] * STEPS)
POISSON = record_count(STEPS, local_size=100, sample_rate=0.1)  # B ~ Binomial(300, 0.1)


def _rng(case: str, offset: int) -> np.random.Generator:
    return np.random.default_rng(offset + sum(map(ord, case)))


def _boundary(rejects: Callable[[float], bool], accepted: float, rejected: float) -> float:
    for _ in range(64):
        mid = 0.5 * (accepted + rejected)
        accepted, rejected = (accepted, mid) if rejects(mid) else (mid, rejected)
    return 0.5 * (accepted + rejected)


def _region(test: Callable[[float], Verdict], center: float) -> tuple[float, float]:
    """``(lo, hi)`` with the test rejecting exactly ``x < lo`` or ``x > hi``."""

    def rejects(x: float) -> bool:
        return test(x).status == "inconsistent"

    assert not rejects(center)
    lo = _boundary(rejects, center, 0.0) if rejects(0.0) else 0.0
    far = 2.0 * center
    while not rejects(far):
        far *= 2.0
        if far > 1e6 * center:
            return lo, math.inf
    return lo, _boundary(rejects, center, far)


def _rate(test: Callable[[float], Verdict], observed: np.ndarray, center: float) -> int:
    lo, hi = _region(test, center)
    flagged = (observed < lo) | (observed > hi)
    for x in observed[:60]:  # the region is the test's own decision
        assert (test(float(x)).status == "inconsistent") == bool((x < lo) | (x > hi))
    return int(flagged.sum())


def _aligned(count: np.ndarray | float) -> np.ndarray:
    e = np.zeros(DIM)
    e[0] = 1.0
    return np.outer(np.broadcast_to(count, (DRAWS,)), e)


def _adaptive(
    noise: list[np.ndarray], step_signal: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """``Σ_t (S_t + N_t)`` with ``S_t = step_signal(running sum before step t)``; ``S_1`` from
    the zero vector's sign (0)."""
    total = np.zeros((DRAWS, DIM))
    for n_t in noise:
        total = total + step_signal(total) + n_t
    return total


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _gaussian_case(case: str, rng: np.random.Generator) -> tuple[np.ndarray, object, int]:
    """(‖u‖₂ per draw, records law, steps) for σ = C = 1."""
    if case == "k1-no-signal":
        return np.linalg.norm(rng.standard_normal((DRAWS, DIM)), axis=1), KNOWN_1, 1
    if case == "k1-aligned":
        u = rng.standard_normal((DRAWS, DIM)) + _aligned(3 * PER_STEP)
        return np.linalg.norm(u, axis=1), KNOWN_1, 1
    noise = [rng.standard_normal((DRAWS, DIM)) for _ in range(STEPS)]
    if case == "k3-poisson-aligned":
        count = rng.binomial(300, 0.1, size=DRAWS)
        return np.linalg.norm(sum(noise) + _aligned(count), axis=1), POISSON, STEPS
    sign = -1.0 if case == "k3-cancel" else 1.0
    u = _adaptive(noise, lambda run: sign * PER_STEP * _unit_rows(run))
    return np.linalg.norm(u, axis=1), KNOWN_3, STEPS


@pytest.mark.parametrize(
    "case", ["k1-no-signal", "k1-aligned", "k3-poisson-aligned", "k3-cancel", "k3-reinforce"]
)
def test_gaussian_norm_test_false_alarm_rate(case):
    rng = _rng(case, 0)
    observed, records, steps = _gaussian_case(case, rng)

    def test(x: float) -> Verdict:
        return gaussian_norm_test(
            x, dim=DIM, noise_std=1.0, steps=steps, clip_bound=1.0, records=records, alpha=ALPHA
        )

    rejections = _rate(test, observed, math.sqrt(steps * DIM))
    assert rejections <= LIMIT
    if case == "k1-no-signal":  # the low side is exact: P(‖N‖ < a) = α/2, not less
        assert rejections >= stats.binom.ppf(1e-9, DRAWS, ALPHA / 2)


def _laplace_case(case: str, rng: np.random.Generator) -> tuple[np.ndarray, object, int]:
    """(‖u‖₁ per draw, records law, steps) for b = C = 1 and ℓ1 clipping."""
    if case == "k1-no-signal":
        return np.abs(rng.laplace(size=(DRAWS, DIM))).sum(1), KNOWN_1, 1
    if case == "k1-aligned":
        u = rng.laplace(size=(DRAWS, DIM)) + _aligned(3 * PER_STEP)
        return np.abs(u).sum(1), KNOWN_1, 1
    noise = [rng.laplace(size=(DRAWS, DIM)) for _ in range(STEPS)]
    if case == "k3-poisson-aligned":
        count = rng.binomial(300, 0.1, size=DRAWS)
        return np.abs(sum(noise) + _aligned(count)).sum(1), POISSON, STEPS
    sign = -1.0 if case == "k3-cancel" else 1.0  # ℓ1 norm PER_STEP, along the running signs
    u = _adaptive(noise, lambda run: sign * PER_STEP * np.sign(run) / DIM)
    return np.abs(u).sum(1), KNOWN_3, STEPS


@pytest.mark.parametrize(
    "case", ["k1-no-signal", "k1-aligned", "k3-poisson-aligned", "k3-cancel", "k3-reinforce"]
)
def test_laplace_norm_test_false_alarm_rate(case):
    rng = _rng(case, 100)
    observed, records, steps = _laplace_case(case, rng)

    def test(x: float) -> Verdict:
        return laplace_norm_test(
            x, dim=DIM, noise_scale=1.0, steps=steps, clip_bound=1.0, records=records, alpha=ALPHA
        )

    rejections = _rate(test, observed, float(np.median(observed)))
    assert rejections <= LIMIT
    if case == "k1-no-signal":  # Gamma(p, 1) is the exact law of the low side
        assert rejections >= stats.binom.ppf(1e-9, DRAWS, ALPHA / 2)


def _one_coordinate(norm_value: float) -> Callable[[float], np.ndarray]:
    """A vector whose ℓ1 (or ℓ2) norm is ``norm_value``: the shape tests take vectors."""

    def vector(x: float) -> np.ndarray:
        v = np.zeros(DIM)
        v[0] = x * norm_value
        return v

    return vector


@pytest.mark.parametrize("case", ["k1-no-signal", "k3-cancel"])
def test_gaussian_shape_test_false_alarm_rate(case):
    rng = _rng(case, 200)
    noise = [rng.standard_normal((DRAWS, DIM)) for _ in range(1 if case == "k1-no-signal" else 3)]
    steps, records = len(noise), KNOWN_1 if len(noise) == 1 else KNOWN_3
    # cancel in ℓ1 with an ℓ2-bounded signal: −PER_STEP·sign(running)/√p
    u = _adaptive(noise, lambda run: -PER_STEP * np.sign(run) / math.sqrt(DIM))
    observed = np.abs(u).sum(1)

    def test(x: float) -> Verdict:  # a vector with ‖·‖₁ = x
        return gaussian_shape_test(
            _one_coordinate(1.0)(x), noise_std=1.0, steps=steps, clip_bound=1.0,
            records=records, alpha=ALPHA,
        )  # fmt: skip

    # one-sided (low) test: the region is {x < lo}
    rejections = _rate(test, observed, float(np.median(observed)))
    assert rejections <= LIMIT


def test_laplace_shape_test_false_alarm_rate():
    rng = np.random.default_rng(300)
    observed = np.linalg.norm(rng.laplace(size=(DRAWS, DIM)), axis=1)

    def test(x: float) -> Verdict:  # a vector with ‖·‖₂ = x
        return laplace_shape_test(
            _one_coordinate(1.0)(x), noise_scale=1.0, steps=1, clip_bound=1.0,
            records=KNOWN_1, alpha=ALPHA,
        )  # fmt: skip

    assert _rate(test, observed, float(np.median(observed))) <= LIMIT


def test_clip_test_false_alarm_rate_with_every_gradient_aligned():
    rng = np.random.default_rng(400)
    observed = rng.binomial(300, 0.1, size=DRAWS).astype(float)  # ‖u‖ = C·B, C = 1

    def test(x: float) -> Verdict:
        return clip_norm_test(x, clip_bound=1.0, records=POISSON, alpha=ALPHA)

    assert _rate(test, observed, 30.0) <= LIMIT


def test_batch_size_test_false_alarm_rate():
    rng = np.random.default_rng(500)
    totals = rng.binomial(300, 0.1, size=DRAWS)
    flagged = np.array([
        check_batch_sizes([t, 0, 0], local_size=100, sample_rate=0.1, alpha=ALPHA).status
        == "inconsistent"
        for t in range(301)
    ])  # fmt: skip
    assert int(flagged[totals].sum()) <= LIMIT
    assert flagged[0] and flagged[300] and not flagged[30]
