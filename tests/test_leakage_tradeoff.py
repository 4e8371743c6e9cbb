"""Trade-off functions (privacy-math.md §4): properties, closed forms, Monte Carlo, quadrature.

The axioms and the symmetry f(f(a)) = a are checked for every mechanism: closed forms, the
VMF numerics and the PLD-profile curves of subsampled, composed mechanisms.
"""

from __future__ import annotations

import math
from functools import cache

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, stats

from fedpriv.errors import InputError
from fedpriv.leakage.profiles import PrivacyProfile, subsampled_profile
from fedpriv.leakage.tradeoff import (
    blatant_non_privacy_tradeoff,
    gaussian_tradeoff,
    laplace_tradeoff,
    perfect_privacy_tradeoff,
    tradeoff_from_privacy_profile,
    vmf_tradeoff,
)
from fedpriv.mechanisms.gaussian import GaussianRelease
from fedpriv.mechanisms.laplace import LaplaceRelease

GRID = np.linspace(0.0, 1.0, 2001)


@cache
def _profile(kind: str) -> PrivacyProfile:
    if kind == "gaussian":
        return subsampled_profile(GaussianRelease(2.0), 0.1, 5)
    return subsampled_profile(LaplaceRelease(2.0), 0.1, 5)


SYMMETRIC = {
    "gaussian-0.3": lambda a: gaussian_tradeoff(a, 0.3),
    "gaussian-2": lambda a: gaussian_tradeoff(a, 2.0),
    "laplace-0.5": lambda a: laplace_tradeoff(a, 0.5),
    "laplace-3": lambda a: laplace_tradeoff(a, 3.0),
    "vmf-p2": lambda a: vmf_tradeoff(a, 1.5, 2),
    "vmf-p3": lambda a: vmf_tradeoff(a, 2.0, 3),
    "vmf-p50": lambda a: vmf_tradeoff(a, 10.0, 50),
    "vmf-p13700": lambda a: vmf_tradeoff(a, 100.0, 13_700),
    "vmf-p1e5-k1e5": lambda a: vmf_tradeoff(a, 1e5, 100_000),
    "pp": perfect_privacy_tradeoff,
    "subsampled-gaussian": lambda a: _profile("gaussian").tradeoff(a),
    "subsampled-laplace": lambda a: _profile("laplace").tradeoff(a),
}


# closed forms and the (exactly symmetric) profile envelopes are exact to rounding; the VMF
# curve is interpolated between quadrature nodes
TOLERANCE = {name: 1e-5 if name.startswith("vmf") else 1e-9 for name in SYMMETRIC}


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
def test_tradeoff_axioms(name: str) -> None:
    f = SYMMETRIC[name](GRID)
    assert f[0] <= 1.0 and f[-1] == 0.0
    assert np.all(f >= 0.0) and np.all(f <= 1.0 - GRID + 1e-12)  # no test beats guessing
    assert np.all(np.diff(f) <= 1e-13)  # non-increasing
    assert np.all(np.diff(f, 2) >= -1e-2 * TOLERANCE[name])  # convex


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
def test_symmetric_mechanisms_are_involutions(name: str) -> None:
    f = SYMMETRIC[name]
    inner = GRID[1:-1]
    once = f(inner)
    kept = (once > 1e-300) & (once < 1)  # f(a) subnormal or 0: no digits left to invert
    assert np.max(np.abs(f(once[kept]) - inner[kept]), initial=0.0) < TOLERANCE[name]


def test_blatant_non_privacy() -> None:
    assert np.all(blatant_non_privacy_tradeoff(GRID) == 0.0)
    assert np.all(gaussian_tradeoff(GRID, math.inf) == 0.0)
    assert np.all(laplace_tradeoff(GRID, math.inf) == 0.0)


@pytest.mark.parametrize("mu", [0.0, 1e-9])
def test_no_signal_is_perfect_privacy(mu: float) -> None:
    assert np.allclose(gaussian_tradeoff(GRID, mu), 1.0 - GRID, atol=1e-8)
    assert np.allclose(laplace_tradeoff(GRID, mu), 1.0 - GRID, atol=1e-8)


def _empirical_tradeoff(p_draws, q_draws, thresholds) -> tuple[np.ndarray, ...]:  # noqa: ANN001
    """Type-I/II errors of 'reject P when x > c' with their standard errors."""
    a = (p_draws[None, :] > thresholds[:, None]).mean(axis=1)
    b = (q_draws[None, :] <= thresholds[:, None]).mean(axis=1)
    n = p_draws.size
    return a, b, np.sqrt(b * (1 - b) / n)


@pytest.mark.parametrize(
    ("sampler", "tradeoff", "mu"),
    [
        (lambda rng, loc, n: rng.normal(loc, 1.0, n), gaussian_tradeoff, 1.3),
        (lambda rng, loc, n: rng.laplace(loc, 1.0, n), laplace_tradeoff, 1.3),
    ],
)
def test_closed_forms_against_monte_carlo(sampler, tradeoff, mu: float) -> None:  # noqa: ANN001
    rng = np.random.default_rng(7)
    p_draws, q_draws = sampler(rng, 0.0, 200_000), sampler(rng, mu, 200_000)
    thresholds = np.linspace(-1.5, 2.5, 9)
    a_hat, b_hat, se = _empirical_tradeoff(p_draws, q_draws, thresholds)
    # compare at the exact type-I error of each threshold test (P's CDF is known)
    a_exact = (
        stats.norm.sf(thresholds) if tradeoff is gaussian_tradeoff else stats.laplace.sf(thresholds)
    )
    assert np.max(np.abs(a_hat - a_exact)) < 0.01
    assert np.all(np.abs(b_hat - tradeoff(a_exact, mu)) < 4 * se + 1e-12)


def _vmf_p3_exact(alpha: float, kappa: float) -> float:
    """p = 3: t has density ∝ e^{κt} on [−1, 1]; f(a) = P(t < −τ) with P(t ≤ τ) = a."""
    with mpmath.workdps(60):
        k, a = mpmath.mpf(kappa), mpmath.mpf(alpha)
        span = mpmath.exp(k) - mpmath.exp(-k)
        tau = mpmath.log(a * span + mpmath.exp(-k)) / k
        return float((mpmath.exp(-k * tau) - mpmath.exp(-k)) / span)


@pytest.mark.parametrize("kappa", [1e-3, 0.5, 3.0, 30.0])
def test_vmf_p3_closed_form(kappa: float) -> None:
    alphas = np.concatenate(
        [np.logspace(-12, -1, 12), np.linspace(0.2, 0.8, 4), 1 - np.logspace(-1, -12, 12)]
    )
    got = vmf_tradeoff(alphas, kappa, 3)
    want = np.array([_vmf_p3_exact(a, kappa) for a in alphas])
    assert np.allclose(got, want, rtol=1e-6, atol=0.0)


def test_vmf_p3_large_kappa_in_log_space() -> None:
    alphas = np.array([1e-9, 0.01, 0.5, 0.99])
    got = np.log(vmf_tradeoff(alphas, 300.0, 3))
    want = np.log([_vmf_p3_exact(a, 300.0) for a in alphas])
    assert np.allclose(got, want, rtol=1e-7)


@pytest.mark.parametrize("kappa", [0.3, 2.0, 20.0])
def test_vmf_p5_against_direct_quadrature(kappa: float) -> None:
    def density(sign: float):  # noqa: ANN202
        return lambda t: math.exp(sign * kappa * t) * (1 - t * t)

    total = integrate.quad(density(1.0), -1, 1, epsabs=0, epsrel=1e-13)[0]
    for alpha in (0.01, 0.2, 0.5, 0.8, 0.99):

        def excess(tau: float, alpha: float = alpha) -> float:
            return integrate.quad(density(1.0), -1, tau, epsabs=0, epsrel=1e-13)[0] / total - alpha

        tau = optimize.brentq(excess, -1.0, 1.0, xtol=1e-15)
        want = integrate.quad(density(-1.0), tau, 1, epsabs=0, epsrel=1e-13)[0] / total
        assert vmf_tradeoff(alpha, kappa, 5) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(("dim", "kappa"), [(13_700, 20.0), (13_700, 60.0), (100_000, 300.0)])
def test_vmf_high_dimension_is_gaussian_like(dim: int, kappa: float) -> None:
    # κ ≪ p: the loss 2κt is ≈ N(μ²/2, μ²) with μ = 2κ/√p (privacy-math.md §2), an approximation
    alphas = np.linspace(0.0, 1.0, 10_001)
    gap = np.abs(
        vmf_tradeoff(alphas, kappa, dim) - gaussian_tradeoff(alphas, 2 * kappa / math.sqrt(dim))
    )
    assert gap.max() < 5e-5


@pytest.mark.parametrize("dim", [2, 3, 13_700, 10**5, 10**7])
@pytest.mark.parametrize("kappa", [1e-6, 1.0, 1e3, 1e5])
def test_vmf_finite_everywhere(dim: int, kappa: float) -> None:
    f = vmf_tradeoff(GRID, kappa, dim)
    assert np.all(np.isfinite(f)) and f[0] == 1.0 and f[-1] == 0.0
    assert np.all(np.diff(f) <= 1e-13)


def test_vmf_tv_p3_closed_form() -> None:
    # TV of the p = 3 pair is P(t > 0) − Q(t > 0) = tanh(κ/2)
    alphas = np.linspace(0.0, 1.0, 200_001)
    for kappa in (0.1, 1.0, 5.0):
        tv = np.max(1 - alphas - vmf_tradeoff(alphas, kappa, 3))
        assert tv == pytest.approx(math.tanh(kappa / 2), abs=1e-8)


def test_profile_conversion_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    eps = np.sort(rng.uniform(0, 4, 300))
    # a genuine profile: δ(ε) of a random discrete privacy-loss distribution
    losses, probs = rng.normal(1.0, 1.0, 50), rng.dirichlet(np.ones(50))
    delta = np.array([np.sum(probs * np.maximum(0, 1 - np.exp(e - losses))) for e in eps])
    head = 1 - delta
    lines = np.maximum(head - np.exp(eps) * GRID[:, None], np.exp(-eps) * (head - GRID[:, None]))
    brute = np.maximum(lines.max(axis=1), 0.0)
    assert np.allclose(tradeoff_from_privacy_profile(GRID, eps, delta), brute, atol=1e-14)


def test_profile_conversion_of_gaussian_profile_is_gaussian() -> None:
    # the analytic Gaussian profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018)
    mu = 1.2
    eps = np.linspace(0, 12, 4001)
    delta = stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    f = tradeoff_from_privacy_profile(GRID, eps, delta)
    assert np.max(np.abs(f - gaussian_tradeoff(GRID, mu))) < 1e-6


@settings(max_examples=25, deadline=None, derandomize=True)
@given(mu=st.floats(0.05, 6.0), alpha=st.floats(1e-6, 1 - 1e-6))
def test_gaussian_involution_property(mu: float, alpha: float) -> None:
    assert gaussian_tradeoff(gaussian_tradeoff(alpha, mu), mu) == pytest.approx(alpha, abs=1e-9)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(kappa=st.floats(0.01, 500.0), dim=st.integers(2, 20_000))
def test_vmf_properties_random(kappa: float, dim: int) -> None:
    f = vmf_tradeoff(GRID, kappa, dim)
    assert np.all(np.diff(f, 2) >= -1e-7)
    inner = f[1:-1]
    kept = (inner > 1e-300) & (inner < 1)
    gap = np.abs(vmf_tradeoff(inner[kept], kappa, dim) - GRID[1:-1][kept])
    assert np.max(gap, initial=0.0) < 1e-5


@pytest.mark.parametrize("bad", [[-0.1], [1.5], [math.nan]])
def test_alpha_outside_unit_interval_rejected(bad: list[float]) -> None:
    with pytest.raises(InputError, match="alpha"):
        gaussian_tradeoff(bad, 1.0)
    with pytest.raises(InputError, match="alpha"):
        vmf_tradeoff(bad, 1.0, 3)


def test_bad_parameters_rejected() -> None:
    with pytest.raises(InputError, match="mu"):
        gaussian_tradeoff(0.5, -1.0)
    with pytest.raises(InputError, match="kappa"):
        vmf_tradeoff(0.5, 0.0, 3)
    with pytest.raises(InputError, match="dim"):
        vmf_tradeoff(0.5, 1.0, 1)
    with pytest.raises(InputError, match="eps_grid"):
        tradeoff_from_privacy_profile(0.5, [0.0, -1.0], [0.1, 0.2])
