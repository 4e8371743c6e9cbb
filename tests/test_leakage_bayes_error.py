"""Bayes error, Δ-divergence and the PP/BNP extremes (privacy-math.md §4).

Independent references: the Gaussian Bayes error in closed form (likelihood-ratio test
``x > μ/2 + log(π/(1−π))/μ``); TV in closed form for Gaussian, Laplace and VMF p = 3; and Δ
recomputed from the definition of the Bayes error, ``∫ min(π p, (1−π) q)``, by quadrature.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from fedpriv.errors import InputError
from fedpriv.leakage.bayes_error import (
    TradeoffCurve,
    bayes_error,
    blatant_non_privacy,
    delta_divergence,
    perfect_privacy,
    symmetric_delta,
)
from fedpriv.leakage.profiles import subsampled_profile
from fedpriv.leakage.tradeoff import gaussian_tradeoff, laplace_tradeoff, vmf_tradeoff
from fedpriv.mechanisms.gaussian import GaussianRelease
from fedpriv.mechanisms.laplace import LaplaceRelease

PP, BNP = perfect_privacy(), blatant_non_privacy()

MECHANISMS = {
    "gaussian": lambda: TradeoffCurve.from_function(lambda a: gaussian_tradeoff(a, 1.0)),
    "gaussian-strong": lambda: TradeoffCurve.from_function(lambda a: gaussian_tradeoff(a, 6.0)),
    "laplace": lambda: TradeoffCurve.from_function(lambda a: laplace_tradeoff(a, 1.0)),
    "vmf-p3": lambda: TradeoffCurve.from_function(lambda a: vmf_tradeoff(a, 2.0, 3)),
    "vmf-p13700": lambda: TradeoffCurve.from_function(lambda a: vmf_tradeoff(a, 100.0, 13_700)),
    "subsampled-gaussian": lambda: TradeoffCurve.from_function(
        subsampled_profile(GaussianRelease(2.0), 0.1, 20).tradeoff
    ),
    "subsampled-laplace": lambda: TradeoffCurve.from_function(
        subsampled_profile(LaplaceRelease(2.0), 0.1, 20).tradeoff
    ),
    "pp": perfect_privacy,
    "bnp": blatant_non_privacy,
}


def _gaussian_bayes_error(pi: np.ndarray, mu: float) -> np.ndarray:
    c = mu / 2 + np.log(pi / (1 - pi)) / mu
    return pi * stats.norm.sf(c) + (1 - pi) * stats.norm.cdf(c - mu)


@pytest.mark.parametrize("mu", [0.1, 1.0, 3.0, 8.0])
def test_bayes_error_matches_gaussian_closed_form(mu: float) -> None:
    curve = TradeoffCurve.from_function(lambda a: gaussian_tradeoff(a, mu))
    pi = np.linspace(0.001, 0.999, 999)
    assert np.max(np.abs(curve.bayes_error(pi) - _gaussian_bayes_error(pi, mu))) < 1e-6


@pytest.mark.parametrize(
    ("tradeoff", "tv"),
    [
        (lambda a: gaussian_tradeoff(a, 1.0), 2 * stats.norm.cdf(0.5) - 1),
        (lambda a: gaussian_tradeoff(a, 6.0), 2 * stats.norm.cdf(3.0) - 1),
        (lambda a: laplace_tradeoff(a, 1.0), 1 - math.exp(-0.5)),
        (lambda a: vmf_tradeoff(a, 2.0, 3), math.tanh(1.0)),
    ],
)
def test_total_variation_closed_forms(tradeoff, tv: float) -> None:  # noqa: ANN001
    assert TradeoffCurve.from_function(tradeoff).total_variation() == pytest.approx(tv, abs=1e-6)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_extremes(name: str) -> None:
    curve = MECHANISMS[name]()
    tv = curve.total_variation()
    from_pp, _ = delta_divergence(PP, curve)
    to_bnp, _ = delta_divergence(curve, BNP)
    assert from_pp == pytest.approx(tv / 2, abs=1e-9)
    assert to_bnp == pytest.approx(curve.max_bayes_error()[0], abs=1e-12)
    assert from_pp + to_bnp == pytest.approx(0.5, abs=1e-6)
    assert delta_divergence(curve, curve)[0] == 0.0


def _bayes_error_by_quadrature(pi: float, p_pdf, q_pdf, breaks: list[float]) -> float:  # noqa: ANN001
    """The definition: R(π) = ∫ min(π p(x), (1 − π) q(x)) dx (quadrature between breakpoints)."""
    edges = [-np.inf, *breaks, np.inf]
    return sum(
        integrate.quad(lambda x: min(pi * p_pdf(x), (1 - pi) * q_pdf(x)), lo, hi, epsabs=1e-13)[0]
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    )


def _brute_delta(r_first, r_second) -> float:  # noqa: ANN001
    """max over π of r_first − r_second: a grid of priors, then a finer one around the best."""
    coarse = np.linspace(0.005, 0.995, 199)
    gap = [r_first(p) - r_second(p) for p in coarse]
    k = int(np.argmax(gap))
    fine = np.linspace(coarse[max(k - 1, 0)], coarse[min(k + 1, coarse.size - 1)], 201)
    return max(max(gap), max(r_first(p) - r_second(p) for p in fine))


def test_delta_against_definition_by_quadrature() -> None:
    mu = 1.0
    root = math.sqrt(2 * math.pi)
    gauss = (
        lambda x: math.exp(-x * x / 2) / root,
        lambda x: math.exp(-((x - mu) ** 2) / 2) / root,
    )
    lap = (lambda x: math.exp(-abs(x)) / 2, lambda x: math.exp(-abs(x - mu)) / 2)

    def r_gauss(pi: float) -> float:
        return _bayes_error_by_quadrature(pi, *gauss, [mu / 2])

    def r_lap(pi: float) -> float:
        return _bayes_error_by_quadrature(pi, *lap, [0.0, mu / 2, mu])

    curve_g = TradeoffCurve.from_function(lambda a: gaussian_tradeoff(a, mu))
    curve_l = TradeoffCurve.from_function(lambda a: laplace_tradeoff(a, mu))
    assert delta_divergence(curve_g, curve_l)[0] == pytest.approx(
        _brute_delta(r_gauss, r_lap), abs=1e-4
    )
    assert delta_divergence(curve_l, curve_g)[0] == pytest.approx(
        _brute_delta(r_lap, r_gauss), abs=1e-4
    )
    # Δ(G‖L) sits at π = 1/2 (both symmetric): (TV_L − TV_G)/2 in closed form
    closed = ((1 - math.exp(-mu / 2)) - (2 * stats.norm.cdf(mu / 2) - 1)) / 2
    assert delta_divergence(curve_g, curve_l)[0] == pytest.approx(closed, abs=1e-8)


def test_gaussians_ordered_by_mu() -> None:
    weak = TradeoffCurve.from_function(lambda a: gaussian_tradeoff(a, 0.5))
    strong = TradeoffCurve.from_function(lambda a: gaussian_tradeoff(a, 2.0))
    value, prior = delta_divergence(weak, strong)
    # R(π) − R̃(π) for Gaussians peaks at π = 1/2: Φ(−μ₁/2) − Φ(−μ₂/2)
    assert value == pytest.approx(stats.norm.cdf(-0.25) - stats.norm.cdf(-1.0), abs=1e-7)
    assert prior == pytest.approx(0.5, abs=1e-3)
    assert delta_divergence(strong, weak)[0] < 1e-12


_CURVE_KINDS = st.one_of(
    st.tuples(st.just("gaussian"), st.floats(0.05, 5.0)),
    st.tuples(st.just("laplace"), st.floats(0.05, 5.0)),
    st.tuples(st.just("vmf"), st.floats(0.1, 50.0)),
)


def _curve(kind: tuple[str, float]) -> TradeoffCurve:
    name, value = kind
    functions = {
        "gaussian": lambda a: gaussian_tradeoff(a, value),
        "laplace": lambda a: laplace_tradeoff(a, value),
        "vmf": lambda a: vmf_tradeoff(a, value, 20),
    }
    return TradeoffCurve.from_function(functions[name])


@settings(max_examples=20, deadline=None, derandomize=True)
@given(first=_CURVE_KINDS, second=_CURVE_KINDS, third=_CURVE_KINDS)
def test_symmetric_delta_is_a_metric(first, second, third) -> None:  # noqa: ANN001
    x, y, z = _curve(first), _curve(second), _curve(third)
    assert symmetric_delta(x, x) == 0.0
    assert symmetric_delta(x, y) == symmetric_delta(y, x)
    assert symmetric_delta(x, z) <= symmetric_delta(x, y) + symmetric_delta(y, z) + 1e-12
    assert symmetric_delta(x, y) >= 0.0


def test_bayes_error_rejects_bad_priors() -> None:
    with pytest.raises(InputError, match="priors"):
        bayes_error([0.0, 1.0], [1.0, 0.0], [1.5])
