"""Bayes capacity (privacy-math.md §5) against closed forms, mpmath and Monte Carlo.

The Monte-Carlo oracle estimates ``∫ sup_x f(x)(y) dy`` directly by importance sampling: the
sup over the secret ball is the noise density at the nearest ball point, ``max(0, ‖y‖ − r)``
away (ℓ2 ball for Gaussian noise, ℓ1 ball for Laplace noise).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from bessel_support import mp_log_ive
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from fedpriv.commands.capacity import capacity_report
from fedpriv.errors import InputError
from fedpriv.leakage.capacity import (
    compose_log_capacities,
    log_capacity_gaussian,
    log_capacity_laplace,
    log_capacity_vmf,
    secret_radius,
)

SAMPLES = 400_000


def _mc_gaussian(dim: int, r: float, s: float, rng: np.random.Generator) -> tuple[float, float]:
    """Importance-sampled C with proposal N(0, τ²I), τ² = s² + r²; returns (estimate, s.e.)."""
    tau = math.sqrt(s * s + r * r)
    y = rng.normal(scale=tau, size=(SAMPLES, dim))
    dist = np.maximum(np.linalg.norm(y, axis=1) - r, 0.0)
    log_sup = -0.5 * dim * math.log(2 * math.pi * s * s) - dist**2 / (2 * s * s)
    log_q = stats.norm.logpdf(y, scale=tau).sum(axis=1)
    w = np.exp(log_sup - log_q)
    return float(w.mean()), float(w.std(ddof=1) / math.sqrt(SAMPLES))


def _mc_laplace(dim: int, r: float, b: float, rng: np.random.Generator) -> tuple[float, float]:
    """Importance-sampled C with proposal Lap(0, b + r/dim)^p; returns (estimate, s.e.)."""
    scale = b + r / dim
    y = rng.laplace(scale=scale, size=(SAMPLES, dim))
    dist = np.maximum(np.abs(y).sum(axis=1) - r, 0.0)
    log_sup = -dim * math.log(2 * b) - dist / b
    log_q = stats.laplace.logpdf(y, scale=scale).sum(axis=1)
    w = np.exp(log_sup - log_q)
    return float(w.mean()), float(w.std(ddof=1) / math.sqrt(SAMPLES))


def _mp_gaussian(dim: int, r: float, s: float) -> float:
    """The spec's Gaussian formula term by term in 50-digit arithmetic."""
    with mpmath.workdps(50):
        p, r, s = mpmath.mpf(dim), mpmath.mpf(r), mpmath.mpf(s)
        norm = 2 ** (p / 2) * s**p
        ball = r**p / (mpmath.gamma(p / 2 + 1) * norm)
        terms = (
            mpmath.gamma((p - i) / 2)
            * (mpmath.sqrt(2) * s) ** (p - i)
            * mpmath.binomial(p - 1, i)
            * r**i
            for i in range(dim)
        )
        return float(mpmath.log(ball + mpmath.fsum(terms) / (mpmath.gamma(p / 2) * norm)))


@pytest.mark.parametrize("dim", [1, 2, 13_700, 10**7])
def test_zero_radius_gives_zero(dim: int) -> None:
    assert log_capacity_gaussian(dim, 0.0, 0.7) == 0.0
    assert log_capacity_laplace(dim, 0.0, 0.7) == 0.0
    assert 0.0 < log_capacity_gaussian(dim, 1e-12, 0.7) < 1e-8
    assert 0.0 < log_capacity_laplace(dim, 1e-12, 0.7) < 1e-8


@pytest.mark.parametrize("dim", [2, 3, 50, 13_700])
def test_vmf_small_kappa_gives_zero(dim: int) -> None:
    assert log_capacity_vmf(dim, 1e-9) == pytest.approx(0.0, abs=1e-8)
    assert log_capacity_vmf(dim, 1e-5) < log_capacity_vmf(dim, 1e-3)


@pytest.mark.parametrize(("r", "s"), [(1e-6, 1.0), (0.3, 1.0), (1.0, 0.1), (5.0, 0.01)])
def test_gaussian_p1_closed_form(r: float, s: float) -> None:
    expected = math.log1p(2 * r / (s * math.sqrt(2 * math.pi)))
    assert log_capacity_gaussian(1, r, s) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("kappa", [1e-4, 0.5, 3.0, 50.0, 700.0, 1e5, 1e20, 1e25, 1e80, 1e300])
def test_vmf_p3_closed_form(kappa: float) -> None:
    # log(κ e^κ / sinh κ) = log(2κ) − log1p(−e^{−2κ})
    expected = math.log(2 * kappa) - math.log(-math.expm1(-2 * kappa))
    assert log_capacity_vmf(3, kappa) == pytest.approx(expected, rel=1e-13, abs=1e-15)


def _mp_vmf(dim: int, kappa: float) -> float:
    """The spec's formula (privacy-math.md §5) as written, at 60 + log10 κ digits, so that
    ``κ − log I_ν(κ)`` keeps 50: log 2 + ν log κ + κ − log Γ(p/2) − (p/2) log 2 − log I_ν(κ)."""
    nu = mpmath.mpf(dim) / 2 - 1
    with mpmath.workdps(60 + max(0, int(math.log10(kappa)))):
        k = mpmath.mpf(kappa)
        log_iv = mp_log_ive(nu, kappa) + k
        head = mpmath.log(2) + nu * mpmath.log(k) + k
        return float(head - mpmath.loggamma(mpmath.mpf(dim) / 2) - dim * mpmath.log(2) / 2 - log_iv)


VMF_KAPPAS = [1e-9, 1e-3, 1.0, 1.5, 30.0, 1e3, 1e6, 1e20, 1e25, 1e80, 1e100, 1e300]


@pytest.mark.parametrize("kappa", VMF_KAPPAS)
@pytest.mark.parametrize("dim", [2, 3, 50, 201, 202, 13_700, 10**7])
def test_vmf_against_mpmath_50_digits(dim: int, kappa: float) -> None:
    """κ = 1e20 gave 245,760 (the value is 257,039) and κ = 1e25, 1e100, 1e300 gave 0 before
    ``log_normalized_ive``: ``κ − log I_ν(κ)`` was formed in double precision."""
    assert log_capacity_vmf(dim, kappa) == pytest.approx(_mp_vmf(dim, kappa), rel=1e-12)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(2, 10**7), st.floats(-300.0, 300.0), st.floats(-16.0, 1.0))
def test_vmf_monotone_in_kappa_over_the_whole_range(dim: int, log10_kappa: float,
                                                     log10_step: float) -> None:
    """log C is non-decreasing in κ (its derivative is 1 − A_p(κ) > 0) for κ from 1e-300 to
    1e301, up to 1e-14 relative (≈ 45 units in the last place; a cancellation of terms of size
    ν log ν, as in the old code, leaves errors of 1e-9 and more)."""
    low = 10.0**log10_kappa
    high = low * (1.0 + 10.0**log10_step)
    a, b = log_capacity_vmf(dim, low), log_capacity_vmf(dim, high)
    assert math.isfinite(b) and a >= 0.0
    assert b >= a * (1.0 - 1e-14)


@pytest.mark.parametrize("ratio", [1e-6, 0.5, 3.0, 1e3])
def test_laplace_p1_closed_form(ratio: float) -> None:
    assert log_capacity_laplace(1, ratio * 2.0, 2.0) == pytest.approx(math.log1p(ratio), rel=1e-12)


@pytest.mark.parametrize("ratio", [0.5, 7.0, 40.0])
def test_laplace_large_p_tends_to_exp(ratio: float) -> None:
    assert log_capacity_laplace(10**6, ratio, 1.0) == pytest.approx(ratio, rel=1e-12)
    # finite p: the Poisson CDF, log C = r/b + log P(N ≤ p), N ~ Poisson(r/b)
    expected = ratio + math.log(special.pdtr(5, ratio))
    assert log_capacity_laplace(5, ratio, 1.0) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(
    ("dim", "r", "s"), [(7, 1.0, 0.3), (50, 1.0, 1.0), (400, 2.0, 0.5), (2000, 1.0, 0.05)]
)
def test_gaussian_against_mpmath(dim: int, r: float, s: float) -> None:
    assert log_capacity_gaussian(dim, r, s) == pytest.approx(_mp_gaussian(dim, r, s), rel=1e-11)


@pytest.mark.parametrize(
    ("dim", "r", "s"), [(1, 1.0, 0.5), (2, 1.0, 1.0), (3, 2.0, 1.0), (5, 1.0, 0.8)]
)
def test_gaussian_against_monte_carlo(dim: int, r: float, s: float) -> None:
    est, se = _mc_gaussian(dim, r, s, np.random.default_rng(1000 + dim))
    exact = math.exp(log_capacity_gaussian(dim, r, s))
    assert se < 0.01 * est  # the check has power: 2x (the published error) would be 100 s.e.
    assert abs(est - exact) < 4 * se


@pytest.mark.parametrize(
    ("dim", "r", "b"), [(1, 1.0, 0.5), (2, 1.0, 1.0), (3, 3.0, 1.0), (4, 1.0, 0.3)]
)
def test_laplace_against_monte_carlo(dim: int, r: float, b: float) -> None:
    est, se = _mc_laplace(dim, r, b, np.random.default_rng(2000 + dim))
    exact = math.exp(log_capacity_laplace(dim, r, b))
    assert se < 0.01 * est
    assert abs(est - exact) < 4 * se


@pytest.mark.parametrize("dim", [13_700, 10**7])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_finite_at_huge_dimension(dim: int, scale: float) -> None:
    for value in (
        log_capacity_gaussian(dim, 1.0, scale),
        log_capacity_laplace(dim, 1.0, scale),
        log_capacity_vmf(dim, 1e5 * min(scale, 1.0)),
    ):
        assert math.isfinite(value) and value >= 0.0


def test_gaussian_large_p_matches_mode_scaling() -> None:
    # log C grows like sqrt(2p)·r/s for r/s ≪ sqrt(p): the mode term ~ u·sqrt(2p), u = r/(√2 s)
    value = log_capacity_gaussian(10**7, 1.0, 1.0)
    assert value == pytest.approx(math.sqrt(10**7), rel=1e-3)


@pytest.mark.parametrize("kappa", [1.0, 100.0, 1e4, 1e5])
def test_vmf_monotone_in_kappa_and_bounded(kappa: float) -> None:
    # C ≤ e^{2κ} (2κ-LDP bounds Sibson's I_∞) and grows with κ
    value = log_capacity_vmf(13_700, kappa)
    assert 0.0 < value <= 2 * kappa
    assert log_capacity_vmf(13_700, 1.1 * kappa) > value


def test_compose_adds_and_keeps_inf() -> None:
    parts = [log_capacity_gaussian(100, 1.0, 1.0), log_capacity_vmf(100, 5.0), 0.0]
    assert compose_log_capacities(parts) == pytest.approx(sum(parts), rel=1e-15)
    assert compose_log_capacities(parts + [math.inf]) == math.inf
    assert compose_log_capacities([]) == 0.0
    with pytest.raises(InputError):
        compose_log_capacities([1.0, math.nan])


def test_threat_model_radius() -> None:
    assert secret_radius(0.5) == 0.5
    assert secret_radius(0.5, "batch", 64) == 32.0
    with pytest.raises(InputError, match="batch_size"):
        secret_radius(0.5, "batch")
    with pytest.raises(InputError, match="threat_model"):
        secret_radius(0.5, "dataset", 10)


def test_report_batch_level_uses_l_times_c() -> None:
    out = capacity_report(
        "gaussian", 100, noise={"noise_std": 2.0}, radius=0.5, threat_model="batch", batch_size=8
    )
    assert out["radius"] == 4.0 and out["threat_model"] == "batch"
    assert out["log_capacity"] == log_capacity_gaussian(100, 4.0, 2.0)
    huge = capacity_report("gaussian", 10**7, noise={"noise_std": 1e-3})
    assert huge["capacity"] == math.inf and math.isfinite(huge["log_capacity"])


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda: log_capacity_gaussian(0, 1.0, 1.0), "dim"),
        (lambda: log_capacity_gaussian(2.5, 1.0, 1.0), "dim"),
        (lambda: log_capacity_gaussian(3, -1.0, 1.0), "radius"),
        (lambda: log_capacity_gaussian(3, 1.0, 0.0), "noise_std"),
        (lambda: log_capacity_laplace(3, 1.0, -2.0), "scale"),
        (lambda: log_capacity_vmf(1, 1.0), "dim"),
        (lambda: log_capacity_vmf(3, 0.0), "kappa"),
        (lambda: log_capacity_vmf(3, math.inf), "kappa"),
        (lambda: capacity_report("vmf", 3, noise={"noise_std": 1.0}), "kappa"),
        (lambda: capacity_report("vmf", 3, noise={"kappa": 1.0, "noise_std": 1.0}), "noise_std"),
        (lambda: capacity_report("clip", 3, noise={}), "mechanism"),
    ],
)
def test_bad_inputs_name_the_key(call, key: str) -> None:  # noqa: ANN001
    with pytest.raises(InputError) as info:
        call()
    assert info.value.key == key
