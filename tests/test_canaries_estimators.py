"""ε lower bounds from canary scores, each checked by an independent route.

Closed forms (perfect separation, all guesses right), exact binomial sums, the exact Gaussian
δ(ε) in mpmath, quadrature for the non-central t, dp-accounting's PLD, and coverage Monte
Carlo on mechanisms whose ε is known exactly (randomized response, the Gaussian shift). Every
Monte Carlo uses a fixed seed and states its false-failure probability; each coverage test
also shows that an estimator without confidence correction fails it (the test can fail).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.canaries import (
    epsilon_clopper_pearson,
    epsilon_gdp_fit,
    epsilon_gdp_thresholds,
    epsilon_one_run,
    gdp_epsilon,
    one_run_p_value,
)
from fedpriv.canaries.clopper_pearson import clopper_pearson_upper
from fedpriv.canaries.gdp import noncentral_t_lower
from fedpriv.canaries.one_run import guess_grid
from fedpriv.errors import InputError
from fedpriv.mechanisms import make_release

ALPHA = 0.05


def _binomial_ceiling(trials: int, p: float, tail: float = 1e-6) -> int:
    """Smallest c with P[Binomial(trials, p) > c] < tail: the most violations a correct
    (1 − p)-confidence bound may show before the test calls it wrong."""
    return int(scipy.stats.binom.isf(tail, trials, p)) + 1


def _naive_epsilon(ins: np.ndarray, outs: np.ndarray, delta: float) -> float:
    """``max_t log((TPR − δ)/FPR)`` from raw rates: no confidence correction (invalid)."""
    t = np.union1d(ins, outs)
    tpr = (ins[:, None] >= t).mean(axis=0)
    fpr = (outs[:, None] >= t).mean(axis=0)
    ok = (fpr > 0) & (tpr > delta)
    return float(np.max(np.log(tpr[ok] - delta) - np.log(fpr[ok]), initial=0.0))


def _randomized_response(eps: float, n: int, rng: np.random.Generator):
    """0/1 scores of ``n`` canaries through ε-randomized response: each canary's response is
    its bit with probability ``e^ε/(1+e^ε)`` — exactly (ε, 0)-DP per canary."""
    bits = rng.random(n) < 0.5
    keep = rng.random(n) < scipy.special.expit(eps)
    scores = np.where(keep, bits, ~bits).astype(float)
    return scores[bits], scores[~bits]


# ---------------------------------------------------------------- Clopper–Pearson


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (9, 10), (0, 500), (250, 500)])
def test_clopper_pearson_upper_solves_its_defining_equation(k: int, n: int) -> None:
    """The upper bound u has ``P[Binomial(n, u) ≤ k] = alpha`` (SciPy's binomial CDF)."""
    u = float(clopper_pearson_upper(k, n, 0.01))
    assert scipy.stats.binom.cdf(k, n, u) == pytest.approx(0.01, rel=1e-8)
    assert clopper_pearson_upper(n, n, 0.01) == 1.0


@pytest.mark.parametrize("threshold", [0.5, None])
def test_clopper_pearson_closed_form_for_perfect_separation(threshold: float | None) -> None:
    """All in-scores 1, out-scores 0: no errors, and the zero-count bound is ``1 − a^{1/n}``.

    So ``ε = log((a^{1/n₁} − δ)/(1 − a^{1/n₀}))`` with ``a = α/2`` for a fixed threshold and
    ``a = α/(n₀ + n₁)`` for the search (the reverse inequality gives the same with n₀ = n₁).
    """
    n_in, n_out, delta = 60, 40, 1e-5
    result = epsilon_clopper_pearson(np.ones(n_in), np.zeros(n_out), delta=delta,
                                     threshold=threshold)
    a = ALPHA / 2 if threshold is not None else ALPHA / (n_in + n_out)
    forward = math.log((a ** (1 / n_in) - delta) / (1 - a ** (1 / n_out)))
    reverse = math.log((a ** (1 / n_out) - delta) / (1 - a ** (1 / n_in)))
    assert result.epsilon == pytest.approx(max(forward, reverse), rel=1e-10)
    assert result.detail["false_positives"] == result.detail["false_negatives"] == 0


def test_clopper_pearson_covers_randomized_response() -> None:
    """RR with ε = 1 is exactly (1, 0)-DP: the 95% bound may exceed 1 in at most 5% of runs.

    2,000 runs of 200 canaries; a correct bound fails this test with probability < 1e-6
    (binomial ceiling). The uncorrected estimate exceeds ε in most runs.
    """
    rng = np.random.default_rng(10)
    runs = [_randomized_response(1.0, 200, rng) for _ in range(2_000)]
    bounds = [epsilon_clopper_pearson(i, o, delta=1e-6).epsilon for i, o in runs]
    assert sum(b > 1.0 for b in bounds) <= _binomial_ceiling(2_000, ALPHA)
    assert np.mean([_naive_epsilon(i, o, 1e-6) > 1.0 for i, o in runs[:200]]) > 0.2


# ---------------------------------------------------------------- one run


@pytest.mark.parametrize(("m", "r", "v", "eps", "delta"),
                         [(100, 40, 30, 0.5, 0.0), (100, 40, 40, 2.0, 0.0),
                          (1_000, 120, 90, 1.0, 1e-5), (1_000, 60, 58, 3.0, 1e-4),
                          (50, 10, 5, 0.0, 1e-3)])
def test_one_run_p_value_against_exact_rational_arithmetic(
    m: int, r: int, v: int, eps: float, delta: float
) -> None:
    """``f(v) + 2mδ max_i (f(v−i) − f(v))/i`` with every binomial tail summed exactly in
    rationals (q = e^ε/(1+e^ε) rounded to a rational first)."""
    q = Fraction(float(scipy.special.expit(eps)))
    pmf = [math.comb(r, w) * q**w * (1 - q) ** (r - w) for w in range(r + 1)]
    tails = [sum(pmf[w:], Fraction(0)) for w in range(r + 1)]  # tails[w] = P[W ≥ w]
    window = max((tails[v - i] - tails[v]) / i for i in range(1, v + 1))
    expected = min(1.0, float(tails[v] + 2 * m * Fraction(delta) * window))
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_one_run_p_value_rises_with_epsilon() -> None:
    """The bound takes the largest rejected ε by root finding, which needs a p-value rising in
    ε: checked on a grid of (m, r, v, δ) and 300 values of ε."""
    grid = np.linspace(0.0, 12.0, 300)
    for m, delta in [(100, 0.0), (1_000, 1e-5), (10_000, 1e-5), (10_000, 1e-3)]:
        for r in (10, 100, min(m, 2_000)):
            for v in {r // 2, (4 * r) // 5, r}:
                p = [one_run_p_value(m, r, v, e, delta) for e in grid]
                assert np.all(np.diff(p) >= -1e-15), (m, delta, r, v)


@pytest.mark.parametrize("r", [20, 200, 1_000])
def test_one_run_closed_form_when_every_guess_is_right(r: int) -> None:
    """``v = r`` and negligible δ: the p-value is ``q^r``, so ``ε = logit(α^{1/r})``."""
    ins, outs = np.arange(r, 2.0 * r), np.arange(0.0, r)
    result = epsilon_one_run(ins, outs, delta=1e-15, guesses=r, two_sided=False)
    assert result.detail["guesses"] == result.detail["correct"] == r
    expected = scipy.special.logit(ALPHA ** (1 / r))
    assert result.epsilon == pytest.approx(expected, abs=1e-5)


def test_default_guess_grid_halves_down_to_one() -> None:
    assert guess_grid(1_000) == (500, 250, 125, 63, 32, 16, 8, 4, 2, 1)
    assert guess_grid(7, two_sided=False) == (7, 4, 2, 1)
    assert guess_grid(512, two_sided=False)[-2:] == (2, 1)


def test_two_sided_guesses_count_both_tails() -> None:
    """Top k guessed in, bottom k guessed out: with separated scores all 2k are right."""
    result = epsilon_one_run(np.arange(50.0, 100.0), np.arange(0.0, 50.0), delta=1e-6,
                             guesses=10)
    assert result.detail["guesses"] == result.detail["correct"] == 20


def test_one_run_covers_randomized_response() -> None:
    """RR is the extremal mechanism of Steinke et al.'s theorem: ε = 1 exactly. Guessing "in"
    for every response 1 (k = the number of ones: chosen from the scores, not the bits, so no
    correction is due) makes the number right exactly Binomial(k, e/(1+e)), and the 95% bound
    exceeds 1 in at most 5% of runs — 600 runs of 1,000 canaries, false-failure probability
    < 1e-6. The raw precision, ``logit(v/r) > 1``, happens in about half of the runs.
    """
    rng = np.random.default_rng(11)
    violations, naive = 0, 0
    for _ in range(600):
        ins, outs = _randomized_response(1.0, 1_000, rng)
        ones = int(ins.sum() + outs.sum())
        result = epsilon_one_run(ins, outs, delta=1e-6, guesses=ones, two_sided=False)
        assert result.detail["guesses"] == ones
        violations += result.epsilon > 1.0
        naive += scipy.special.logit(result.detail["correct"] / ones) > 1.0
    assert violations <= _binomial_ceiling(600, ALPHA)
    assert naive > 200


def test_one_run_bonferroni_grid_is_more_conservative_than_any_fixed_k() -> None:
    """The grid tests each k at α/|grid|, so it never beats the best fixed k at level α."""
    rng = np.random.default_rng(15)
    ins, outs = rng.normal(2.0, 1.0, 500), rng.normal(0.0, 1.0, 500)
    searched = epsilon_one_run(ins, outs, delta=1e-6).epsilon
    fixed = [epsilon_one_run(ins, outs, delta=1e-6, guesses=k).epsilon for k in guess_grid(1_000)]
    assert 0.0 < searched <= max(fixed)


@pytest.mark.parametrize("guesses", [0, 501, [3, 2.5], True])
def test_one_run_refuses_bad_guess_counts(guesses: object) -> None:
    with pytest.raises(InputError):
        epsilon_one_run(np.ones(500), np.zeros(500), delta=1e-5, guesses=guesses)


@pytest.mark.parametrize("call", [epsilon_clopper_pearson, epsilon_one_run, epsilon_gdp_fit,
                                  epsilon_gdp_thresholds])
@pytest.mark.parametrize(("ins", "delta", "confidence"),
                         [([], 1e-5, 0.95), ([[1.0]], 1e-5, 0.95), ([np.nan], 1e-5, 0.95),
                          ([1.0, 2.0], 0.0, 0.95), ([1.0, 2.0], 1e-5, 1.0)])
def test_estimators_refuse_bad_inputs(call, ins, delta, confidence) -> None:
    with pytest.raises(InputError):
        call(ins, [0.0, 1.0], delta=delta, confidence=confidence)


# ---------------------------------------------------------------- Gaussian DP


def _gdp_delta(mu: float, eps: float) -> mpmath.mpf:
    """Dong, Roth & Su (2022), Corollary 2.13, in 50-digit arithmetic."""
    mpmath.mp.dps = 50
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 2.0, 6.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_gdp_epsilon_solves_the_exact_gaussian_delta(mu: float, delta: float) -> None:
    eps = gdp_epsilon(mu, delta)
    if _gdp_delta(mu, 0.0) <= delta:
        assert eps == 0.0
    else:
        assert float(_gdp_delta(mu, eps)) == pytest.approx(delta, rel=1e-7)
    assert gdp_epsilon(0.0, delta) == 0.0


@pytest.mark.parametrize(("sigma", "releases"), [(2.0, 1), (1.0, 3)])
def test_gdp_epsilon_is_the_pld_epsilon_of_unsubsampled_gaussian_releases(
    sigma: float, releases: int
) -> None:
    """T Gaussian releases at q = 1 are exactly √T/σ-GDP: the accountant's PLD (pessimistic,
    value discretisation 1e-4..1e-5) lies at or just above the exact value."""
    exact = gdp_epsilon(math.sqrt(releases) / sigma, 1e-5)
    pld = epsilon([ReleaseEvent(make_release("gaussian", sigma), 1.0, releases)], 1e-5,
                  accountant="pld").epsilon
    assert exact - 1e-9 <= pld <= exact + 2e-3


@pytest.mark.parametrize(("t_stat", "dof"), [(3.0, 10), (10.0, 100), (40.0, 2_000)])
def test_noncentral_t_lower_solves_its_equation_by_quadrature(t_stat: float, dof: int) -> None:
    """``P_nc(T ≥ t) = ∫ Φ(nc − t√(v/ν)) χ²_ν(v) dv`` equals α at the returned ``nc``."""
    nc = noncentral_t_lower(t_stat, dof, ALPHA)

    def integrand(v: float) -> float:
        return scipy.stats.norm.cdf(nc - t_stat * math.sqrt(v / dof)) * scipy.stats.chi2.pdf(v, dof)

    spread = 12.0 * math.sqrt(2.0 * dof)  # χ²_ν has mean ν and sd √(2ν)
    lo, hi = max(0.0, dof - spread), dof + spread
    prob, _ = scipy.integrate.quad(integrand, lo, hi, points=[dof], limit=400, epsabs=1e-13)
    assert prob == pytest.approx(ALPHA, rel=1e-6)


def test_gdp_fit_has_exact_coverage_for_normal_scores() -> None:
    """Normal scores, μ = 1, 200 + 200 canaries: ``μ_lo > μ`` happens in exactly 5% of runs.

    300 runs: the count is Binomial(300, 0.05) (mean 15); a correct implementation leaves
    [2, 35] with probability < 2e-6. A wrong standard error (e.g. ignoring the estimated sd)
    or a two-sided quantile moves the rate far outside.
    """
    rng = np.random.default_rng(12)
    over = 0
    for _ in range(300):
        ins, outs = rng.normal(1.0, 1.0, 200), rng.normal(0.0, 1.0, 200)
        over += epsilon_gdp_fit(ins, outs, delta=1e-5).detail["mu_lower"] > 1.0
    lo, hi = scipy.stats.binom.ppf(1e-6, 300, ALPHA), _binomial_ceiling(300, ALPHA)
    assert lo <= over <= hi


def test_gdp_thresholds_cover_the_gaussian_shift() -> None:
    """Normal scores with μ = 1 are exactly 1-GDP: ``μ_lo > 1`` in at most 5% of 300 runs
    (false-failure probability < 1e-6). The uncorrected estimate exceeds ε(μ=1) in many."""
    rng = np.random.default_rng(13)
    over = 0
    for _ in range(300):
        ins, outs = rng.normal(1.0, 1.0, 200), rng.normal(0.0, 1.0, 200)
        over += epsilon_gdp_thresholds(ins, outs, delta=1e-5).detail["mu_lower"] > 1.0
    assert over <= _binomial_ceiling(300, ALPHA)


def test_gdp_estimates_overstate_a_laplace_mechanism() -> None:
    """The GDP conversion assumes a Gaussian privacy profile. Laplace releases (λ = 1, one
    step, coordinate canaries) are (1, 0)-DP, but a Gaussian fit of their scores extrapolates
    tails they do not have: its ε at δ = 1e-5 exceeds 1, while the one-run bound does not.
    This is why the GDP estimates are for Gaussian releases only."""
    rng = np.random.default_rng(14)
    bits = rng.random(4_000) < 0.5
    u = bits + rng.laplace(0.0, 1.0, 4_000)          # coordinate canaries, C = 1, b = 1
    scores = np.abs(u) - np.abs(u - 1.0)             # the Laplace log-likelihood ratio
    ins, outs = scores[bits], scores[~bits]
    assert epsilon_gdp_fit(ins, outs, delta=1e-5).epsilon > 1.5
    assert epsilon_one_run(ins, outs, delta=1e-5).epsilon < 1.0
