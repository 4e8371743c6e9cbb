"""Privacy-loss functionals v1..v4, eta, Theorem 3 and composed Delta (fedpriv.leakage.blackwell).

Independent references: closed forms (Gaussian, Laplace, VMF mean), mpmath quadrature of the
privacy loss's law, dp-accounting's own delta(eps), and the closed form G_mu^N = G_{sqrt(N) mu}.
"""

from __future__ import annotations

import math
from functools import partial

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from fedpriv.accounting.dp_library import gaussian_pld, laplace_pld
from fedpriv.accounting.vmf_pld import vmf_pld
from fedpriv.errors import InputError
from fedpriv.leakage import blackwell as bw
from fedpriv.leakage.bayes_error import delta_divergence
from fedpriv.leakage.loss_pmf import loss_pmfs, pld_privacy_profile
from fedpriv.leakage.profiles import subsampled_profile
from fedpriv.leakage.tradeoff import (
    blatant_non_privacy_tradeoff,
    gaussian_tradeoff,
    laplace_tradeoff,
    perfect_privacy_tradeoff,
    vmf_tradeoff,
)
from fedpriv.mechanisms.gaussian import GaussianRelease
from fedpriv.special.bessel import log_iv

KEYS = ("v1", "v2", "v3", "v4", "eta")


def _values(functionals: bw.LossFunctionals) -> np.ndarray:
    return np.array([functionals.as_dict()[k] for k in KEYS])


def _normal_abs_third(m: float, s: float) -> float:
    """E|X|^3 for X ~ N(m, s^2): with a = m/s, E[X^3; X > 0] = (m^3 + 3ms^2)Phi(a)
    + s(m^2 + 2s^2)phi(a) (integrate (m + sz)^3 phi(z) over z > -a), and E|X|^3 =
    2 E[X^3; X > 0] - E[X^3]."""
    a = m / s
    return (m**3 + 3 * m * s**2) * (2 * special.ndtr(a) - 1) + 2 * s * (
        m**2 + 2 * s**2
    ) * stats.norm.pdf(a)


def gaussian_reference(mu: float) -> np.ndarray:
    """G_mu: L ~ N(mu^2/2, mu^2) under P, so v1 = mu^2/2, v2 = mu^2 + mu^4/4,
    v3 = mu^3 E|Z|^3 = 2 sqrt(2/pi) mu^3, v4 = E|N(mu^2/2, mu^2)|^3, eta = mu/2."""
    return np.array([mu**2 / 2, mu**2 + mu**4 / 4, 2 * math.sqrt(2 / math.pi) * mu**3,
                     _normal_abs_third(mu**2 / 2, mu), mu / 2])  # fmt: skip


def laplace_reference(mu: float) -> np.ndarray:
    """Lap(0,1) vs Lap(mu,1): L(y) = |y - mu| - |y| is mu for y <= 0 (P-mass 1/2), mu - 2y on
    (0, mu) (density e^{-y}/2) and -mu for y >= mu (mass e^{-mu}/2). Integrating g(L) against
    that law piecewise (split at y = (mu - v1)/2 for v3 and at y = mu/2 for v4; done with
    sympy, checked against mpmath below) gives these closed forms."""
    e = math.exp
    v1 = mu - 1 + e(-mu)
    v2 = mu**2 - 2 * mu + 4 - (2 * mu + 4) * e(-mu)
    v3 = (48 * e((e(-mu) - 1) / 2) - 14 - (12 * mu**2 + 12 * mu + 24) * e(-mu)
          - (12 * mu + 6) * e(-2 * mu) - 4 * e(-3 * mu))  # fmt: skip
    v4 = mu**3 - 3 * mu**2 + 12 * mu - 24 - (3 * mu**2 + 12 * mu + 24) * e(-mu) + 48 * e(-mu / 2)
    return np.array([v1, v2, v3, v4, v1 / math.sqrt(v2 - v1**2)])


def _laplace_quadrature(mu: float) -> np.ndarray:
    mpmath.mp.dps = 30
    mu_m = mpmath.mpf(mu)

    def expect(g):  # noqa: ANN001, ANN202
        inner = mpmath.quad(lambda y: g(mu_m - 2 * y) * mpmath.exp(-y) / 2, [0, mu_m / 2, mu_m])
        return g(mu_m) / 2 + g(-mu_m) * mpmath.exp(-mu_m) / 2 + inner

    v1 = expect(lambda x: x)
    values = [v1, expect(lambda x: x**2), expect(lambda x: abs(x - v1) ** 3),
              expect(lambda x: abs(x) ** 3)]  # fmt: skip
    return np.array([float(v) for v in values])


@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 3.0])
def test_gaussian_functionals_closed_form_both_routes(mu: float) -> None:
    ref = gaussian_reference(mu)
    curve = _values(bw.tradeoff_functionals(partial(gaussian_tradeoff, mu=mu)))
    pmf = _values(bw.pld_functionals(gaussian_pld(1 / mu, 1.0, bw.composition_discretization(mu))))
    np.testing.assert_allclose(curve, ref, rtol=1e-6)  # measured <= 4e-8
    np.testing.assert_allclose(pmf, ref, rtol=1e-5)  # measured <= 3e-6 (PLD discretisation)


def test_gaussian_abs_third_moment_formula_against_quadrature() -> None:
    for m, s in ((0.5, 1.0), (4.5, 3.0), (0.00125, 0.05)):
        direct = mpmath.quad(lambda z, m=m, s=s: abs(m + s * z) ** 3 * mpmath.npdf(z),
                             [-mpmath.inf, -m / s, mpmath.inf])  # fmt: skip
        assert _normal_abs_third(m, s) == pytest.approx(float(direct), rel=1e-12)


@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 3.0])
def test_laplace_functionals_closed_form_both_routes(mu: float) -> None:
    ref = laplace_reference(mu)
    np.testing.assert_allclose(ref[:4], _laplace_quadrature(mu), rtol=1e-9)  # cancels at small mu
    std = math.sqrt(ref[1] - ref[0] ** 2)
    curve = _values(bw.tradeoff_functionals(partial(laplace_tradeoff, mu=mu)))
    pmf = _values(bw.pld_functionals(laplace_pld(1 / mu, 1.0, bw.composition_discretization(std))))
    np.testing.assert_allclose(curve, ref, rtol=1e-5)  # measured <= 9e-7
    np.testing.assert_allclose(pmf, ref, rtol=1e-5)  # measured <= 5e-7


def _vmf_quadrature(kappa: float, dim: int) -> np.ndarray:
    """Moments of L = 2 kappa t, t with density ∝ e^{kappa t} (1 - t^2)^{(p-3)/2} on [-1, 1]."""
    mpmath.mp.dps = 30
    k, half = mpmath.mpf(kappa), mpmath.mpf(dim - 3) / 2

    def expect(g):  # noqa: ANN001, ANN202
        return mpmath.quad(lambda t: g(2 * k * t) * mpmath.exp(k * (t - 1)) * (1 - t * t) ** half,
                           [-1, 0, 1])  # fmt: skip

    z = expect(lambda x: 1)
    v1 = expect(lambda x: x) / z
    values = [v1, expect(lambda x: x**2) / z, expect(lambda x: abs(x - v1) ** 3) / z,
              expect(lambda x: abs(x) ** 3) / z]  # fmt: skip
    return np.array([float(v) for v in values])


@pytest.mark.parametrize(("kappa", "dim"), [(1.0, 3), (10.0, 50)])
def test_vmf_functionals_quadrature_both_routes(kappa: float, dim: int) -> None:
    ref = _vmf_quadrature(kappa, dim)
    curve = _values(bw.tradeoff_functionals(partial(vmf_tradeoff, kappa=kappa, dim=dim)))[:4]
    pmf = _values(bw.pld_functionals(vmf_pld(kappa, dim, 1.0, 1e-3)))[:4]
    np.testing.assert_allclose(curve, ref, rtol=1e-5)
    np.testing.assert_allclose(pmf, ref, rtol=1e-5)


def test_vmf_mean_loss_is_kl_at_paper_dimension() -> None:
    """v1 = KL(P||Q) = E_P[2 kappa t] = 2 kappa A_p(kappa), A_p = I_{p/2} / I_{p/2-1}."""
    kappa, dim = 100.0, 13_700
    mean = 2 * kappa * math.exp(float(log_iv(dim / 2, kappa) - log_iv(dim / 2 - 1, kappa)))
    curve = bw.tradeoff_functionals(partial(vmf_tradeoff, kappa=kappa, dim=dim))
    pmf = bw.pld_functionals(vmf_pld(kappa, dim, 1.0, 1e-3))
    assert curve.v1 == pytest.approx(mean, rel=1e-6)
    assert pmf.v1 == pytest.approx(mean, rel=1e-5)
    np.testing.assert_allclose(_values(curve), _values(pmf), rtol=1e-5)


def _subsampled_moments(sigma: float, q: float, sign: int, density) -> np.ndarray:  # noqa: ANN001
    """Moments of sign*L(y), L(y) = log(1 - q + q e^{(2y - 1)/(2 sigma^2)}), y ~ density."""
    mpmath.mp.dps = 20

    def expect(g):  # noqa: ANN001, ANN202
        def integrand(y):  # noqa: ANN001, ANN202
            loss = mpmath.log(1 - q + q * mpmath.exp((2 * y - 1) / (2 * sigma**2)))
            return g(sign * loss) * density(y)

        return mpmath.quad(integrand, [-13, 0, 1, 14])  # tails beyond: < e^-80

    v1 = expect(lambda x: x)
    values = [v1, expect(lambda x: x**2), expect(lambda x: abs(x - v1) ** 3),
              expect(lambda x: abs(x) ** 3)]  # fmt: skip
    return np.array([float(v) for v in values])


def test_subsampled_directions_are_the_loss_under_p_and_minus_the_loss_under_q() -> None:
    """Remove pair: P = (1-q)N(0,s^2) + qN(1,s^2) vs Q = N(0,s^2), loss L(y) under P; the add
    pair is (Q, P) reflected (y -> -y), whose loss is -L(y) with y ~ Q."""
    sigma, q = 1.0, 0.2
    pld = gaussian_pld(sigma, q, 1e-4)
    remove = _values(bw.pld_functionals(pld, "remove"))[:4]
    add = _values(bw.pld_functionals(pld, "add"))[:4]
    mixture = lambda y: (1 - q) * mpmath.npdf(y, 0, sigma) + q * mpmath.npdf(y, 1, sigma)  # noqa: E731
    # the PLD rounds losses to 1e-4: measured deviations <= 5e-6 absolute
    np.testing.assert_allclose(remove, _subsampled_moments(sigma, q, 1, mixture), atol=1e-5)
    base = lambda y: mpmath.npdf(y, 0, sigma)  # noqa: E731
    np.testing.assert_allclose(add, _subsampled_moments(sigma, q, -1, base), atol=1e-5)
    with pytest.raises(InputError, match="direction"):
        bw.pld_functionals(pld, "replace")


def test_degenerate_losses_are_refused() -> None:
    from dp_accounting.pld import common, privacy_loss_distribution

    with pytest.raises(InputError, match="not constant"):
        bw.tradeoff_functionals(perfect_privacy_tradeoff)
    with pytest.raises(InputError, match="finite"):
        bw.tradeoff_functionals(blatant_non_privacy_tradeoff)
    with pytest.raises(InputError, match="not constant"):
        bw.pld_functionals(privacy_loss_distribution.identity())
    eps_delta = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(1.0, 1e-3)
    )
    with pytest.raises(InputError, match="finite"):
        bw.pld_functionals(eps_delta)


def test_theorem3_for_gaussians_is_the_berry_esseen_slack_at_gdp_mu() -> None:
    """Gaussians: eta = mu/2, so the precondition N/Ñ >= eta~^2/eta^2 is sqrt(N) mu >= sqrt(Ñ) mu~
    and the bound is 0.56 (E|Z|^3/sqrt(N) + E|Z|^3/sqrt(Ñ)) (v3/var^1.5 = E|Z|^3 for a normal)."""
    fa, fb = (bw.LossFunctionals(*gaussian_reference(m)[:4]) for m in (1.0, 2.0))
    abs_third = 2 * math.sqrt(2 / math.pi)
    result = bw.theorem3_bound(fa, fb, 400, 100)  # sqrt(400)*1 = 20 = sqrt(100)*2: equality
    assert (result.threshold, result.ratio, result.holds) == (4.0, 4.0, True)
    assert result.bound == pytest.approx(0.56 * abs_third * (1 / 20 + 1 / 10), rel=1e-12)
    assert bw.theorem3_bound(fa, fb, 401, 100).holds
    failed = bw.theorem3_bound(fa, fb, 399, 100)
    assert not failed.holds and failed.bound is None and failed.vacuous
    assert bw.theorem3_bound(fa, fb, 4, 1).as_dict()["vacuous"]  # 0.56*1.6*1.5 > 1/2
    with pytest.raises(InputError, match="count"):
        bw.theorem3_bound(fa, fb, 0, 1)


def _gaussian_bayes_error(mu: float, priors: np.ndarray) -> np.ndarray:
    """R_min(pi) of N(0,1) vs N(mu,1): threshold at mu/2 + log(pi/(1-pi))/mu."""
    with np.errstate(divide="ignore"):
        x = mu / 2 + np.log(priors / (1 - priors)) / mu
    return priors * special.ndtr(-x) + (1 - priors) * special.ndtr(x - mu)


@pytest.mark.parametrize(("mu_a", "mu_b", "count"), [(0.2, 0.15, 100), (0.05, 0.04, 1000)])
def test_composed_delta_matches_gaussian_closed_form(mu_a: float, mu_b: float, count: int) -> None:
    """G_mu^{⊗N} = G_{sqrt(N) mu} (Dong-Roth-Su Cor. 3.3): Δ(G_b^N‖G_a^N) from R_min directly."""
    plds = [gaussian_pld(1 / m, 1.0, bw.composition_discretization(m)) for m in (mu_a, mu_b)]
    curve_a, curve_b = (bw.composed_curve(p, count) for p in plds)
    priors = np.linspace(0.0, 1.0, 200_001)
    ref = np.max(_gaussian_bayes_error(math.sqrt(count) * mu_b, priors)
                 - _gaussian_bayes_error(math.sqrt(count) * mu_a, priors))  # fmt: skip
    assert delta_divergence(curve_b, curve_a)[0] == pytest.approx(ref, abs=1e-5)
    assert delta_divergence(curve_a, curve_b)[0] < 1e-9  # G_a^N is the less private


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    mech=st.sampled_from([("gaussian", "laplace"), ("laplace", "gaussian"), ("laplace",) * 2]),
    mu_a=st.floats(0.3, 2.0),
    mu_b=st.floats(0.3, 2.0),
    count=st.integers(1, 80),
)
def test_theorem3_bound_dominates_exact_delta(mech, mu_a, mu_b, count) -> None:  # noqa: ANN001
    """Δ(A^N‖B^Ñ) <= bound (+1e-5, the exact Δ's accuracy) at the largest Ñ for which the
    precondition holds, Ñ = floor(N η²/η̃²) (closest to the boundary; else A and B swap)."""
    build = {"gaussian": gaussian_pld, "laplace": laplace_pld}
    plds = [build[m](1 / mu, 1.0, 1e-3) for m, mu in zip(mech, (mu_a, mu_b), strict=True)]
    fa, fb = (bw.pld_functionals(p) for p in plds)
    if fa.eta < fb.eta:
        plds, fa, fb = plds[::-1], fb, fa
    counts = (count, max(1, math.floor(count * fa.eta**2 / fb.eta**2)))
    result = bw.theorem3_bound(fa, fb, *counts)
    assert result.holds
    exact = delta_divergence(*(bw.composed_curve(p, c) for p, c in zip(plds, counts, strict=True)))
    assert exact[0] <= result.bound + 1e-5


def test_precondition_is_load_bearing() -> None:
    """Without the precondition the slack does not bound Δ: G_0.15 composed 100 times against
    400 times is G_1.5 against G_3, Δ(G_1.5‖G_3) ≈ Φ(−0.75) − Φ(−1.5) ≈ 0.16 at π = ½, above
    γ + γ̃ = 0.56·E|Z|³·(1/10 + 1/20) ≈ 0.134; the reverse direction is bounded (Δ = 0)."""
    pld = gaussian_pld(1 / 0.15, 1.0, 1e-3)
    f = bw.pld_functionals(pld)
    few, many = bw.composed_curve(pld, 100), bw.composed_curve(pld, 400)
    wrong = bw.theorem3_bound(f, f, 100, 400)
    assert not wrong.holds
    slack = f.gamma(100) + f.gamma(400)
    assert delta_divergence(few, many)[0] > slack + 0.02
    right = bw.theorem3_bound(f, f, 400, 100)
    assert right.holds and delta_divergence(many, few)[0] <= right.bound


def test_profile_matches_dp_accounting_and_profiles_module() -> None:
    for pld in (gaussian_pld(1.0, 0.1, 1e-3).self_compose(20),  # asymmetric
                laplace_pld(1.0, 1.0, 1e-3).self_compose(7)):  # fmt: skip
        profile = pld_privacy_profile(pld)
        pick = np.linspace(0, profile.epsilons.size - 1, 60).astype(int)
        expected = np.clip(pld.get_delta_for_epsilon(profile.epsilons[pick]), 0.0, 1.0)
        np.testing.assert_allclose(profile.deltas[pick], expected, rtol=0, atol=1e-14)
        top = max(p.losses[-1] for p in loss_pmfs(pld))
        assert profile.deltas[-1] <= 1e-12 or profile.epsilons[-1] > top
    ours = pld_privacy_profile(gaussian_pld(1.0, 0.1, 1e-4).self_compose(5))
    theirs = subsampled_profile(GaussianRelease(1.0), 0.1, 5)
    alpha = np.linspace(0, 1, 1001)
    np.testing.assert_allclose(ours.tradeoff(alpha), theirs.tradeoff(alpha), atol=1e-9)


def test_composed_size_is_exact_and_bounded() -> None:
    pld = laplace_pld(1.0, 1.0, 1e-3)
    for count in (1, 7, 50):
        composed = pld.self_compose(count) if count > 1 else pld
        assert bw.composed_size(pld, count) == loss_pmfs(composed)[0].probs.size
    with pytest.raises(InputError, match="--compose") as err:
        bw.composed_curve(gaussian_pld(1.0, 1.0, 1e-3), 900_000, key="--compose")
    assert "loss values" in err.value.allowed


def test_composition_discretization_rule() -> None:
    assert bw.composition_discretization(1.0) == 1e-3
    assert bw.composition_discretization(0.05) == 1e-4
    assert bw.composition_discretization(2.5e-3) == 1e-5
    with pytest.raises(InputError, match="loss_std"):
        bw.composition_discretization(1e-4)
