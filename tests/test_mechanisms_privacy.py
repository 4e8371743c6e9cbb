"""The privacy methods of each mechanism against closed forms and numerical integration.

These go through each mechanism's release (``mechanism.release(dim)``), with secret radii in
sensitivities (record level: 1), so they catch wrong wiring (σ for 1/σ, b for λ, the clip
bound leaking into scale-free quantities) as well as wrong delegated math.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from fedpriv.mechanisms import build_mechanism

ORDERS = np.array([1.5, 2.0, 5.0, 20.0])
ALPHA = np.linspace(0.0, 1.0, 41)
RADIUS = 1.0  # record level: one sensitivity


def _log_sinh(z: float) -> float:
    return z + math.log1p(-math.exp(-2 * z)) - math.log(2)


@pytest.mark.parametrize("name", ["none", "clip"])
def test_no_guarantee_mechanisms(name: str) -> None:
    mech = build_mechanism(name, {})
    assert np.isinf(mech.release(10).rdp(ORDERS)).all()
    assert math.isinf(mech.release(50).pure_ldp_epsilon(RADIUS))
    assert math.isinf(mech.release(10).log_bayes_capacity(10, RADIUS))
    assert np.array_equal(mech.release(10).tradeoff(ALPHA), np.zeros_like(ALPHA))


@pytest.mark.parametrize("clip", [1.0, 3.0])
def test_gaussian_closed_forms(clip: float) -> None:
    sigma = 1.3
    mech = build_mechanism("gaussian", {"clip": clip, "noise_multiplier": sigma})
    rdp = mech.release(50).rdp(ORDERS)
    np.testing.assert_allclose(rdp, ORDERS / (2 * sigma**2), rtol=1e-12)
    assert math.isinf(mech.release(50).pure_ldp_epsilon(RADIUS))
    # p = 1, record-level radius r = C, noise std s = σC: C_Bayes = 1 + 2r/(s√(2π)).
    expected = math.log1p(2 * clip / (sigma * clip * math.sqrt(2 * math.pi)))
    assert mech.release(1).log_bayes_capacity(1, RADIUS) == pytest.approx(expected, rel=1e-9)
    norm = stats.norm
    curve = norm.cdf(norm.ppf(1 - ALPHA) - 1 / sigma)
    np.testing.assert_allclose(mech.release(50).tradeoff(ALPHA), curve, atol=1e-9)


def test_gaussian_without_noise_has_no_guarantee() -> None:
    mech = build_mechanism("gaussian", {"noise_multiplier": 0.0})
    release = mech.release(5)
    assert np.isinf(release.rdp(ORDERS)).all()
    assert math.isinf(release.log_bayes_capacity(5, RADIUS))
    assert np.array_equal(mech.release(5).tradeoff(ALPHA), np.zeros_like(ALPHA))


def _laplace_renyi(alpha: float, lam: float) -> float:
    """D_α(Lap(0, λ) ‖ Lap(1, λ)) by quadrature."""

    def integrand(x: float) -> float:
        return math.exp(-(alpha * abs(x) + (1 - alpha) * abs(x - 1)) / lam) / (2 * lam)

    pieces = [(-math.inf, 0.0), (0.0, 1.0), (1.0, math.inf)]
    total = sum(integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-12)[0] for a, b in pieces)
    return math.log(total) / (alpha - 1)


@pytest.mark.parametrize("lam", [0.5, 2.0])
def test_laplace_against_quadrature_and_closed_forms(lam: float) -> None:
    clip = 3.0
    mech = build_mechanism("laplace", {"clip": clip, "laplace_scale": lam})
    expected = [_laplace_renyi(a, lam) for a in ORDERS]
    np.testing.assert_allclose(mech.release(50).rdp(ORDERS), expected, rtol=1e-8)
    b = lam * clip
    # LDP over the ℓ1 ball of radius C: the largest log-density ratio between the two farthest
    # secrets ±C, found on a grid of outputs (it is 2C/b, not the add/remove DP parameter 1/λ)
    y = np.linspace(-4 * clip, 4 * clip, 80_001)
    ratio = np.abs(np.abs(y + clip) - np.abs(y - clip)).max() / b
    assert mech.release(50).pure_ldp_epsilon(RADIUS) == pytest.approx(ratio)
    capacity = mech.release(1).log_bayes_capacity(1, RADIUS)
    assert capacity == pytest.approx(math.log1p(clip / b), rel=1e-9)
    lap = stats.laplace
    curve = lap.cdf(lap.ppf(1 - ALPHA) - 1 / lam)
    np.testing.assert_allclose(mech.release(50).tradeoff(ALPHA), curve, atol=1e-9)


@pytest.mark.parametrize("kappa", [0.5, 2.0, 10.0])
def test_vmf_closed_forms_on_the_two_sphere(kappa: float) -> None:
    """At p = 3 the cosine t = xᵀy has density κe^{κt}/(2 sinh κ) on [−1, 1]."""
    mech = build_mechanism("vmf", {"kappa": kappa, "clip": 4.0})  # C must not matter
    a = ORDERS
    rdp = [
        (_log_sinh((2 * x - 1) * kappa) - math.log(2 * x - 1) - _log_sinh(kappa)) / (x - 1)
        for x in a
    ]
    np.testing.assert_allclose(mech.release(3).rdp(a), rdp, rtol=1e-9)
    assert mech.release(50).pure_ldp_epsilon(RADIUS) == 2 * kappa
    capacity = kappa + math.log(kappa) - _log_sinh(kappa)  # log(κ e^κ / sinh κ)
    assert mech.release(3).log_bayes_capacity(3, RADIUS) == pytest.approx(capacity, rel=1e-9)
    # Neyman–Pearson test on t: f(a) = (1/(2a sinh κ + e^{−κ}) − e^{−κ}) / (2 sinh κ).
    two_sinh = 2 * math.sinh(kappa)
    curve = (1 / (ALPHA * two_sinh + math.exp(-kappa)) - math.exp(-kappa)) / two_sinh
    np.testing.assert_allclose(mech.release(3).tradeoff(ALPHA), curve, atol=1e-4)
