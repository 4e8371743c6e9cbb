"""Noise-norm laws (privacy-math.md §9.2–9.3): the closed-form MGFs against mpmath quadrature,
the Chernoff machinery against exact laws, and the bounds against Monte Carlo."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, special, stats

from fedpriv.verification.laws import (
    ChernoffSum,
    ChiNorm,
    GammaNorm,
    abs_normal_slopes,
    excess_kurtoses,
    excess_kurtosis,
    gaussian_excess_law,
    gaussian_l1_law,
    laplace_l1_law,
    laplace_l2_law,
    log_mgf_abs_laplace_sum,
    log_mgf_abs_normal,
    log_mgf_laplace_square,
    log_mgf_normal_excess,
    lower_quantile,
    mean_abs_laplace_sum,
    ncx2_sf,
    ncx2_sf_minus,
    ncx2_sfs,
    normal_excess_slopes,
)
from fedpriv.verification.records import record_count
from fedpriv.verification.sandwich import one_sided_p_value, one_sided_p_values


def _ncx2_sf_series(x: float, df: int, nc: float) -> float:
    """``P(χ'²_df(nc) ≥ x)`` as the Poisson mixture of central χ² tails, in mpmath."""
    mpmath.mp.dps = 40
    half, total, j = mpmath.mpf(nc) / 2, mpmath.mpf(0), 0
    while True:
        weight = mpmath.exp(-half + j * mpmath.log(half) - mpmath.loggamma(j + 1))
        total += weight * mpmath.gammainc(mpmath.mpf(df) / 2 + j, mpmath.mpf(x) / 2,
                                          mpmath.inf, regularized=True)
        if j > half and weight < mpmath.mpf(10) ** -30:
            return float(total)
        j += 1


@pytest.mark.parametrize(("df", "nc"), [(2, 0.5), (150, 30.0), (13_700, 400.0)])
@pytest.mark.parametrize("level", [0.5, 1e-3, 1e-7, 1e-12])
def test_ncx2_sf_matches_the_poisson_mixture(df, nc, level):
    # both branches: the complement of chndtr (tails above 1e-6) and scipy.stats below it
    x = float(stats.ncx2.isf(level, df, nc))
    assert ncx2_sf(x, df, nc) == pytest.approx(_ncx2_sf_series(x, df, nc), rel=1e-8)


@pytest.mark.parametrize(("df", "nc"), [(150, 30.0), (13_700, 400.0)])
@pytest.mark.parametrize("level", [0.03, 1e-8])
def test_ncx2_sf_minus_has_the_sign_of_the_exact_tail_minus_the_level(df, nc, level):
    """What the observed-noise bound's root finder asks (verification/observed.py): the sign
    of ``sf − level`` right at, just above and just below the level, and far from it."""
    at = float(stats.ncx2.isf(level, df, nc))
    for x in (0.5 * at, at * (1 - 1e-9), at * (1 + 1e-9), 2.0 * at):
        exact = _ncx2_sf_series(x, df, nc) - level
        got = ncx2_sf_minus(x, df, nc, level)
        assert math.copysign(1.0, got) == math.copysign(1.0, exact)
        assert got == pytest.approx(exact, rel=1e-6, abs=1e-15)


@pytest.mark.parametrize("lam", [-30.0, -1.0, -0.01, 0.0, 0.5, 3.0, 20.0])
def test_abs_normal_mgf_matches_quadrature(lam):
    with mpmath.workdps(30):
        exact = mpmath.quad(lambda z: 2 * mpmath.npdf(z) * mpmath.exp(lam * z), [0, 1, mpmath.inf])
        assert log_mgf_abs_normal(lam) == pytest.approx(float(mpmath.log(exact)), abs=1e-10)


@pytest.mark.parametrize("lam", [-45.0, -30.5, -29.5, -5.0, -0.7, -1e-3, 0.0, 0.4, 6.0])
def test_abs_normal_slopes_are_the_mgf_derivatives(lam):
    """ψ' and ψ'' of the Newton route against mpmath's derivatives of the quadrature MGF (both
    branches: through erfc above λ = −30, through log Φ below)."""
    with mpmath.workdps(40):
        def log_mgf(x):
            return mpmath.log(2 * mpmath.exp(x * x / 2) * mpmath.ncdf(x))

        first, second = (float(mpmath.diff(log_mgf, lam, n)) for n in (1, 2))
    slope, curvature = abs_normal_slopes(lam)
    assert slope == pytest.approx(first, rel=1e-8, abs=1e-13)  # λ + m cancels for λ ≪ 0
    assert curvature == pytest.approx(second, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("tau", [0.5, 2.0, 3.5])
@pytest.mark.parametrize("lam", [-59.0, -30.0, -5.0, -0.5, 0.0, 0.7, 4.0, 30.0, 45.0])
def test_normal_excess_slopes_are_the_mgf_derivatives(tau, lam):
    """ψ' and ψ'' of the light-tail law against mpmath's derivatives of its MGF in closed form
    (the Mills-ratio branch, and the limits beyond λ = τ + 35)."""
    with mpmath.workdps(60):
        def log_mgf(x):
            t = mpmath.mpf(tau)
            return mpmath.log(mpmath.erf(t / mpmath.sqrt(2))
                              + 2 * mpmath.exp(x * x / 2 - x * t) * mpmath.ncdf(x - t))

        first, second = (float(mpmath.diff(log_mgf, lam, n)) for n in (1, 2))
    slope, curvature = normal_excess_slopes(lam, tau)
    assert slope == pytest.approx(first, rel=1e-11)
    assert curvature == pytest.approx(second, rel=1e-8)


@pytest.mark.parametrize("p", [50, 13_700])
@pytest.mark.parametrize("tau", [1.0, 3.0])
def test_light_tail_newton_bound_is_brents(p, tau):
    """The light-tail law minimises its exponent by Newton steps; scipy's bounded Brent search
    on the same exponent gives the same bound (never looser), on both tails."""
    newton = gaussian_excess_law(p, tau)
    assert newton == gaussian_excess_law(p, tau)  # by value: lower_quantile keeps it per law
    assert hash(newton) == hash(gaussian_excess_law(p, tau))
    brent = ChernoffSum(p, lambda lam: log_mgf_normal_excess(lam, tau), newton.mean)
    mean = p * newton.mean
    pairs = [(newton.cdf(t), brent.cdf(t)) for t in mean * np.array([0.01, 0.5, 0.9, 0.99])]
    pairs += [(newton.sf(t), brent.sf(t)) for t in mean * np.array([1.01, 1.5, 3.0])]
    for ours, theirs in pairs:
        if theirs == 0.0:
            assert ours == 0.0
            continue
        assert math.log(ours) <= math.log(theirs) + 1e-9
        assert math.log(ours) == pytest.approx(math.log(theirs), abs=1e-6)


@pytest.mark.parametrize("p", [1, 50, 13_700])
def test_newton_chernoff_bound_is_brents(p):
    """The Gaussian ℓ1 law minimises its Chernoff exponent by Newton steps; scipy's bounded
    Brent search on the same exponent (the route without ``slopes``) gives the same bound to
    rounding (never looser), on both tails, far into them and at the ends of the λ range."""
    newton = gaussian_l1_law(p)
    brent = ChernoffSum(p, log_mgf_abs_normal, math.sqrt(2.0 / math.pi))
    mean = p * math.sqrt(2.0 / math.pi)
    pairs = [(newton.cdf(t), brent.cdf(t))
             for t in mean * np.array([1e-4, 0.01, 0.3, 0.7, 0.9, 0.99, 0.999, 1.0])]
    pairs += [(newton.sf(t), brent.sf(t)) for t in mean * np.array([1.0, 1.001, 1.1, 1.5, 3.0])]
    for ours, theirs in pairs:  # never looser; tighter only where Brent stops short of λ = −60
        if theirs == 0.0:  # exp underflows: far in the tail at p = 13,700
            assert ours == 0.0
            continue
        assert math.log(ours) <= math.log(theirs) + 1e-9
        assert math.log(ours) == pytest.approx(math.log(theirs), abs=1e-6)


def _abs_difference_moment(k: int, log_weight) -> float:
    """``E w(|G₁ − G₂|)`` for iid ``G_j ~ Gamma(k, 1)`` by 2-D quadrature over ``t = |x − y|``
    and ``y`` (the two orderings are symmetric): an independent route to the MGF's derivation.
    ``log_weight(t) = log w(t)``."""
    log_norm = -2 * special.gammaln(k)

    def integrand(t: float, y: float) -> float:
        if y <= 0 or t <= 0:
            return 0.0
        log_g = (k - 1) * (math.log(y + t) + math.log(y)) - 2 * y - t + log_norm
        return math.exp(log_weight(t) + log_g)

    value, error = integrate.dblquad(integrand, 0, np.inf, 0, np.inf, epsabs=0, epsrel=1e-11)
    assert error < 1e-9 * value
    return 2 * value


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("lam", [-2.0, 0.6])
def test_abs_laplace_sum_mgf_matches_a_double_integral(k, lam):
    exact = _abs_difference_moment(k, lambda t: lam * t)
    assert log_mgf_abs_laplace_sum(lam, k) == pytest.approx(math.log(exact), rel=1e-8, abs=1e-9)
    assert log_mgf_abs_laplace_sum(1.0, k) == math.inf


@pytest.mark.parametrize("k", [1, 2, 4])
def test_abs_laplace_sum_mean_matches_a_double_integral(k):
    exact = _abs_difference_moment(k, math.log)
    assert mean_abs_laplace_sum(k) == pytest.approx(exact, rel=1e-8)


@pytest.mark.parametrize("lam", [-1e-6, -0.01, -1.0, -100.0])
def test_laplace_square_mgf_matches_quadrature(lam):
    with mpmath.workdps(30):
        exact = mpmath.quad(lambda v: mpmath.exp(lam * v * v - v), [0, 1, mpmath.inf])
    expected = float(mpmath.log(exact))
    assert log_mgf_laplace_square(lam) == pytest.approx(expected, rel=1e-10, abs=1e-14)
    assert log_mgf_laplace_square(0.0) == 0.0 and log_mgf_laplace_square(0.1) == math.inf


def test_chernoff_on_chi_square_bounds_the_exact_tails():
    """The generic Chernoff class with Y = Z² (MGF (1 − 2λ)^{−1/2}, power 2) against χ_p."""
    p = 300
    chernoff = ChernoffSum(p, lambda lam: -0.5 * math.log1p(-2 * lam), 1.0, 0.5, power=2)
    exact = ChiNorm(p)
    for t in math.sqrt(p) + np.array([-6.0, -3.0, -1.0, 1.0, 3.0, 6.0]):
        assert exact.cdf(t) <= chernoff.cdf(t) <= 1.0
        assert exact.sf(t) <= chernoff.sf(t) <= 1.0
    # Bahadur–Rao: the bound exceeds the exact tail by about z·sqrt(2π) far out
    t = math.sqrt(p) - 5.0
    assert chernoff.cdf(t) < 30 * exact.cdf(t)


@pytest.mark.parametrize("p", [50, 13_700])
def test_chernoff_laplace_one_step_bounds_the_gamma_law(p):
    chernoff = ChernoffSum(p, lambda lam: log_mgf_abs_laplace_sum(lam, 1), 1.0, 1.0)
    exact = GammaNorm(p)
    assert laplace_l1_law(p, 1) == exact
    for z in (-5.0, -2.0, 2.0, 5.0):
        t = p + z * math.sqrt(p)
        assert exact.cdf(t) <= chernoff.cdf(t)
        assert exact.sf(t) <= chernoff.sf(t)


def test_chernoff_quantile_loses_little_against_the_exact_one():
    """At p = 13,700 and level 5·10⁻⁷ the Chernoff quantile sits at most 12% farther from the
    mean than the Gamma quantile (the price of a rigorous bound for k > 1)."""
    p, level = 13_700, 5e-7
    chernoff = ChernoffSum(p, lambda lam: log_mgf_abs_laplace_sum(lam, 1), 1.0, 1.0)
    exact_gap = p - stats.gamma.ppf(level, p)
    bound_gap = p - lower_quantile(chernoff, level, float(p))
    assert exact_gap < bound_gap < 1.12 * exact_gap


def _empirical_bound_check(law, samples: np.ndarray) -> None:
    """Every tail bound at or above the empirical tail, at thresholds where that is ≈ 1–5%."""
    n = samples.size
    for q in (0.01, 0.05, 0.95, 0.99):
        t = float(np.quantile(samples, q))
        if q < 0.5:
            empirical = float(np.mean(samples <= t))
            bound = law.cdf(t)
        else:
            empirical = float(np.mean(samples >= t))
            bound = law.sf(t)
        se = math.sqrt(empirical * (1 - empirical) / n)
        assert bound >= empirical - 5 * se  # false failure < 3e-7 per comparison


def test_chernoff_laws_bound_monte_carlo_tails():
    rng = np.random.default_rng(20)
    p, n = 60, 40_000
    _empirical_bound_check(gaussian_l1_law(p), np.abs(rng.standard_normal((n, p))).sum(1))
    sums = rng.laplace(size=(n, p, 3)).sum(2)
    _empirical_bound_check(laplace_l1_law(p, 3), np.abs(sums).sum(1))
    lap = rng.laplace(size=(n, p))
    law = laplace_l2_law(p)
    _empirical_bound_check_low(law, np.sqrt((lap**2).sum(1)))
    assert law.sf(1e9) == 1.0  # no upper-tail bound is offered


def _empirical_bound_check_low(law, samples: np.ndarray) -> None:
    for q in (0.01, 0.05):
        t = float(np.quantile(samples, q))
        empirical = float(np.mean(samples <= t))
        se = math.sqrt(empirical * (1 - empirical) / samples.size)
        assert law.cdf(t) >= empirical - 5 * se


def test_lower_quantile_inverts_the_exact_chi_law():
    law = ChiNorm(500)
    t = lower_quantile(law, 1e-6, 100.0)
    assert t == pytest.approx(math.sqrt(stats.chi2.ppf(1e-6, 500)), rel=1e-9)
    assert lower_quantile(law, 0.5, 1.0) == 1.0  # the cap when the whole range qualifies


@pytest.mark.parametrize("draw", ["normal", "laplace", "standard_t"])
def test_excess_kurtosis_is_scipys(draw):
    rng = np.random.default_rng(3)
    u = getattr(rng, draw)(5.0, size=13_700) if draw == "standard_t" else getattr(rng, draw)(
        size=13_700)
    assert excess_kurtosis(u) == pytest.approx(float(stats.kurtosis(u)), rel=1e-12, abs=1e-12)
    assert math.isnan(excess_kurtosis(np.zeros(4)))


def test_the_kurtosis_of_an_underflowing_vector_is_its_scaled_copys():
    """``m₂ ≈ 10⁻¹⁷⁰`` squares to 0 in float64: the kurtosis (scale-free) is that of the same
    vector at unit scale, for one vector as for rows, instead of a ZeroDivisionError (one
    reply's verdict) or NaN (the batch's), whichever path took it."""
    rng = np.random.default_rng(5)
    u = rng.standard_normal(3_000)
    for scale in (2.0**-283, 2.0**-330, 2.0**300, 2.0**350):  # exact scalings
        assert excess_kurtosis(scale * u) == excess_kurtosis(u)
    rows = np.stack([u, 1e-85 * u, 1e150 * u, np.zeros_like(u)])
    got = excess_kurtoses(rows.copy())
    assert got[:3] == pytest.approx([excess_kurtosis(u)] * 3, rel=1e-12)
    assert [excess_kurtosis(r) for r in rows[:3]] == got[:3].tolist() and math.isnan(got[3])


def test_the_array_forms_are_the_scalar_ones_bit_for_bit():
    """The batch's χ tails, non-central χ² and bisection over the record bound (one call for
    many replies) give each element what the scalar forms (one reply) give, edge values
    included: the two forms are kept apart only for speed (the scalar ones, called dozens of
    times per reply alone and per step in steps mode, cost a fifth of a 1-element array's)."""
    rng = np.random.default_rng(6)
    for dim in (1, 3, 3_000):
        law = ChiNorm(dim)
        t = np.concatenate([rng.choice([-1.0, 1.0], 300) * 10 ** rng.uniform(-3, 3, 300)
                            * math.sqrt(dim), [0.0, -0.0, math.inf, -math.inf, math.nan]])
        shift = np.concatenate([10 ** rng.uniform(-3, 2.5, 300), [0.0, 1.0, 1.0, 1.0, 1.0]])
        shift[::7] = 0.0
        pairs = [(law.cdfs(t), [law.cdf(x) for x in t]), (law.sfs(t), [law.sf(x) for x in t]),
                 (law.sfs_shifted(t, shift),
                  [law.sf_shifted(x, v) for x, v in zip(t, shift, strict=True)]),
                 (ncx2_sfs(t * np.abs(t), dim, shift),
                  [ncx2_sf(x * abs(x), dim, v) for x, v in zip(t, shift, strict=True)])]
        for array, scalars in pairs:
            assert array.tobytes() == np.array(scalars).tobytes()
    records = record_count(3, sampling="poisson", local_size=60, sample_rate=16 / 60)
    law, observed = ChiNorm(100), np.array([6.0, 9.0, 10.0, 13.0, 25.0, 40.0])
    p, at = one_sided_p_values(lambda b: law.sfs(observed - 0.5 * b), records, observed.size)
    alone = [one_sided_p_value(lambda b, x=x: law.sf(x - 0.5 * b), records) for x in observed]
    assert (p.tolist(), at.tolist()) == ([a for a, _ in alone], [b for _, b in alone])
