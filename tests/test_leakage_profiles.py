"""Trade-off functions of subsampled/composed mechanisms through dp-accounting PLD profiles.

References: with q = 1 the subsampled Gaussian is the Gaussian mechanism (μ = 1/σ) and T-fold
composition is μ√T (Dong, Roth & Su 2022, Cor. 3.3); one Poisson-subsampled Gaussian release
is C_q(G_μ) = min{f_q, f_q⁻¹}** with f_q = q G_μ + (1 − q) Id (ibid., Thm 4.2), written out in
closed form below; the VMF PLD of the accounting package is an independent implementation of
the same single-release law as :func:`vmf_tradeoff`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from fedpriv.errors import InputError
from fedpriv.leakage.bayes_error import TradeoffCurve, delta_divergence
from fedpriv.leakage.profiles import subsampled_profile
from fedpriv.leakage.tradeoff import gaussian_tradeoff, laplace_tradeoff, vmf_tradeoff
from fedpriv.mechanisms.gaussian import GaussianRelease
from fedpriv.mechanisms.laplace import LaplaceRelease
from fedpriv.mechanisms.vmf import VMFRelease

GRID = np.linspace(0.0, 1.0, 4001)


def _subsampled_gaussian_closed_form(alpha: np.ndarray, mu: float, q: float) -> np.ndarray:
    """C_q(G_μ): f_q on [0, x*], the slope −1 segment on [x*, f_q(x*)], f_q⁻¹ beyond."""

    def f_q(x: np.ndarray) -> np.ndarray:
        return q * gaussian_tradeoff(x, mu) + (1 - q) * (1 - x)

    x_star = stats.norm.cdf(-mu / 2)  # G_μ'(x*) = −1, hence f_q'(x*) = −1
    y_star = float(f_q(x_star))

    def inverse(y: float) -> float:
        return optimize.brentq(lambda x: float(f_q(x)) - y, 0.0, 1.0, xtol=1e-15)

    out = np.empty_like(alpha)
    for i, a in enumerate(alpha):
        if a <= x_star:
            out[i] = f_q(a)
        elif a <= y_star:
            out[i] = x_star + y_star - a
        else:
            out[i] = inverse(a)
    return out


@pytest.mark.parametrize("sigma", [0.8, 2.0])
def test_q1_single_step_is_gaussian(sigma: float) -> None:
    f = subsampled_profile(GaussianRelease(sigma), 1.0, 1).tradeoff(GRID)
    assert np.max(np.abs(f - gaussian_tradeoff(GRID, 1 / sigma))) < 1e-5  # spec asks 1e-3


def test_q1_composition_is_gaussian_root_t() -> None:
    f = subsampled_profile(GaussianRelease(4.0), 1.0, 16).tradeoff(GRID)
    assert np.max(np.abs(f - gaussian_tradeoff(GRID, math.sqrt(16) / 4.0))) < 1e-5


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_q1_laplace_is_laplace(scale: float) -> None:
    f = subsampled_profile(LaplaceRelease(scale), 1.0, 1).tradeoff(GRID)
    assert np.max(np.abs(f - laplace_tradeoff(GRID, 1 / scale))) < 1e-4


@pytest.mark.parametrize(("sigma", "q"), [(1.0, 0.3), (0.8, 0.05)])
def test_one_subsampled_gaussian_step_matches_closed_form(sigma: float, q: float) -> None:
    alphas = np.linspace(0.0, 1.0, 201)
    f = subsampled_profile(GaussianRelease(sigma), q, 1).tradeoff(alphas)
    want = _subsampled_gaussian_closed_form(alphas, 1 / sigma, q)
    assert np.max(np.abs(f - want)) < 1e-4
    assert np.all(f <= want + 1e-9)  # pessimistic PLD: never more private than the truth


def test_vmf_profile_matches_direct_vmf_curve() -> None:
    f = subsampled_profile(VMFRelease(3.0, 3), 1.0, 1).tradeoff(GRID)
    assert np.max(np.abs(f - vmf_tradeoff(GRID, 3.0, 3))) < 5e-5


def test_subsampling_and_composition_order() -> None:
    curves = {
        name: TradeoffCurve.from_function(subsampled_profile(GaussianRelease(3.0), q, t).tradeoff)
        for name, (q, t) in {"few": (0.05, 10), "many": (0.05, 100), "full": (1.0, 10)}.items()
    }
    # more releases or a larger rate leak more: their Bayes error is lower everywhere
    assert delta_divergence(curves["many"], curves["few"])[0] < 1e-9
    assert delta_divergence(curves["few"], curves["many"])[0] > 1e-3
    assert delta_divergence(curves["full"], curves["few"])[0] < 1e-9


@pytest.mark.slow
@pytest.mark.parametrize(
    "build",
    [
        lambda d: subsampled_profile(GaussianRelease(1.0), 0.01, 500, discretization=d),
        lambda d: subsampled_profile(LaplaceRelease(1.0), 0.01, 500, discretization=d),
    ],
)
def test_default_discretisation_is_within_target(build) -> None:  # noqa: ANN001
    coarse = TradeoffCurve.from_function(build(1e-4).tradeoff)
    fine = TradeoffCurve.from_function(build(1e-5).tradeoff)
    assert delta_divergence(fine, coarse)[0] < 1e-4  # coarse is pessimistic: fine ≥ coarse
    assert delta_divergence(coarse, fine)[0] < 1e-9


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda: subsampled_profile(GaussianRelease(0.0), 0.1, 1), "noise_multiplier"),
        (lambda: subsampled_profile(GaussianRelease(1.0), 1.5, 1), "q"),
        (lambda: subsampled_profile(LaplaceRelease(1.0), 0.1, 0), "steps"),
        (lambda: subsampled_profile(VMFRelease(1.0, 1), 0.1, 1), "dim"),
    ],
)
def test_bad_parameters(call, key: str) -> None:  # noqa: ANN001
    with pytest.raises(InputError) as info:
        call()
    assert info.value.key == key
