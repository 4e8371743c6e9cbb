"""The identification game's estimator against closed forms (privacy-math.md §13)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from attacks.estimators.game import play_identification
from fedpriv.errors import InputError
from fedpriv.leakage.bayesian import abp_estimate, mbp_estimate
from fedpriv.leakage.capacity import log_capacity_gaussian
from fedpriv.leakage.game import identification_leakage


def _simplex_success(m: int, d: float, s: float) -> float:
    """P(correct) of the nearest-candidate guess for M candidates at pairwise distance d under
    N(0, s²I): the secret wins iff Z_k − Z_j < d/(√2 s) for every k ≠ j, so
    P = ∫ φ(z) Φ(z + d/(√2 s))^{M−1} dz (for M = 2: Φ(d/(2s)))."""
    shift = d / (math.sqrt(2.0) * s)
    value, _ = integrate.quad(lambda z: stats.norm.pdf(z) * stats.norm.cdf(z + shift) ** (m - 1),
                              -np.inf, np.inf)
    return value


def test_two_point_closed_form_is_phi_of_half_the_distance():
    for d, s in ((1.0, 1.0), (0.3, 0.5), (4.0, 1.0)):
        assert _simplex_success(2, d, s) == pytest.approx(stats.norm.cdf(d / (2 * s)), abs=1e-10)


@pytest.mark.parametrize(("m", "d"), [(2, 1.0), (2, 3.0), (8, 2.0), (16, 4.0)])
def test_game_interval_covers_the_gaussian_closed_form(m, d):
    rng = np.random.default_rng(m * 100 + int(d))
    s, p, trials = 1.0, 4096, 3000
    candidates = np.zeros((m, p))
    candidates[np.arange(m), np.arange(m)] = d / math.sqrt(2.0)  # pairwise distance d
    wins = play_identification(candidates, trials, rng, "gaussian", s)  # fresh noise per trial
    exact = _simplex_success(m, d, s)
    radius = d / math.sqrt(2.0)
    game = identification_leakage(wins, trials, m, log_capacity_gaussian(m - 1, radius, s),
                                  confidence=0.99)
    assert game.log_lower <= math.log(m * exact) <= game.log_upper
    assert abs(wins / trials - exact) < 4 * math.sqrt(exact * (1 - exact) / trials)
    # the (M−1)-dimensional capacity bounds the exact leakage, and the honest game stays below
    assert math.log(m * exact) <= game.log_bound + 1e-12
    assert game.log_lower <= game.log_bound
    assert game.p_value > 0.005


def test_estimates_are_the_bayesian_privacy_of_the_symmetric_posterior():
    game = identification_leakage(40, 100, 5, math.inf)
    posterior = [0.4] + [0.15] * 4
    assert game.mbp == pytest.approx(mbp_estimate(posterior, 5), rel=1e-12)
    assert game.abp == pytest.approx(abp_estimate(posterior), rel=1e-12)
    lo, hi = stats.binomtest(40, 100).proportion_ci(0.95, method="exact")
    assert game.log_lower == pytest.approx(math.log(5 * lo))
    assert game.log_upper == pytest.approx(math.log(5 * hi))
    assert game.mbp_interval[0] <= game.mbp <= game.mbp_interval[1]
    assert game.abp_interval[0] <= game.abp <= game.abp_interval[1]
    assert game.log_bound == pytest.approx(math.log(5))  # no finite capacity: log M


def test_chance_level_interval_reaches_zero_leakage():
    game = identification_leakage(10, 100, 10, 5.0)
    assert game.mbp_interval[0] == 0.0 and game.abp_interval[0] == 0.0
    assert game.log_lower < 0 < game.log_upper
    nothing = identification_leakage(0, 50, 4, 1.0)
    assert nothing.log_value is None and nothing.log_lower is None
    assert nothing.summary()["trials"] == 50


def test_p_value_is_the_binomial_tail_at_the_bound_plus_beta():
    """``P(Bin(n, P₀) ≥ k) + β``: below ``(1 − confidence)/2`` exactly when the
    Clopper–Pearson lower end lies above the bound (the interval's duality)."""
    game = identification_leakage(95, 100, 16, 1.0)
    null = math.exp(1.0) / 16
    assert game.p_value == pytest.approx(stats.binom.sf(94, 100, null), rel=1e-12)
    assert game.log_lower > 1.0 and game.p_value < 0.025
    shifted = identification_leakage(95, 100, 16, 1.0, scale_beta=1e-3)
    assert shifted.p_value == pytest.approx(game.p_value + 1e-3, rel=1e-12)
    for k in range(0, 101, 5):
        g = identification_leakage(k, 100, 4, 0.5)
        above = g.log_lower is not None and g.log_lower > g.log_bound
        assert above == (g.p_value < 0.025), k
    assert identification_leakage(3, 10, 4, math.inf).p_value == 1.0  # bound log M: P₀ = 1


@pytest.mark.parametrize("kwargs", [
    {"successes": 5, "trials": 4}, {"successes": -1}, {"successes": 1.5}, {"trials": 0},
    {"candidates": 1}, {"confidence": 1.0}, {"log_capacity": -0.1},
    {"log_capacity": math.nan}, {"scale_beta": 1.0}, {"scale_beta": -0.1},
])
def test_bad_inputs_raise(kwargs):
    args = {"successes": 1, "trials": 10, "candidates": 4, "log_capacity": 1.0, **kwargs}
    with pytest.raises(InputError):
        identification_leakage(**args)
