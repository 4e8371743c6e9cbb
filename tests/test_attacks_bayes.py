"""Empirical Bayesian privacy from attack runs (privacy-math.md §6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from attacks_support import digits, mean_gradient_view

from attacks import candidate_counts, estimate_bayesian_privacy, run_attack
from fedpriv.errors import InputError

POOL = digits(list(range(10)))[0].numpy()  # ten different digits, one of each class


def _closed_form_perfect(k: int, pool: int, a: float) -> float:
    """ξ̂ when all K reconstructions hit one candidate: the matched and the unmatched ratios."""
    hit = (k + a) * pool / (k + a * pool)
    miss = a * pool / (k + a * pool)
    return max(abs(math.log(hit)), abs(math.log(miss)))


def test_perfect_attack_xi_matches_the_closed_form_and_approaches_log_pool():
    pool = len(POOL)
    values = []
    for k in (1, 5, 20, 90):
        runs = [POOL[3:4]] * k  # every run reconstructs record 3 exactly
        est = estimate_bayesian_privacy(runs, POOL, threshold=0.9, smoothing=1.0)
        assert est.counts.tolist() == [0, 0, 0, k, 0, 0, 0, 0, 0, 0]
        assert est.mbp == pytest.approx(_closed_form_perfect(k, pool, 1.0), rel=1e-12)
        assert est.mbp > 0 and est.abp > 0
        values.append(est.mbp)
    assert np.all(np.diff(values) > 0)
    # at K = a|D|(|D|-1) both ratios equal log|D| exactly; beyond it the never-matched
    # candidates' posterior keeps falling (a perfect attacker has ξ = ∞ in the limit)
    assert values[-1] == pytest.approx(math.log(pool), rel=1e-12)


def test_random_guessing_attack_is_near_zero():
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(POOL), size=400)
    runs = [POOL[i : i + 1] for i in picks]  # a "reconstruction" of a uniformly random record
    est = estimate_bayesian_privacy(runs, POOL, threshold=0.9)
    # counts ~ Multinomial(400, uniform): by Monte Carlo (2e5 draws) the 99.9th percentiles of
    # ξ̂ and ε̂_pa under uniform guessing are ≈ 0.67 and ≈ 0.092
    assert est.mbp < 0.7
    assert est.abp < 0.1
    perfect = estimate_bayesian_privacy([POOL[:1]] * 400, POOL, threshold=0.9)
    assert perfect.mbp == pytest.approx(_closed_form_perfect(400, 10, 1.0))
    assert perfect.mbp > 3.0


def test_noise_reconstructions_match_nothing():
    rng = np.random.default_rng(1)
    runs = [rng.random((2, 1, 16, 16)) for _ in range(20)]
    est = estimate_bayesian_privacy(runs, POOL, threshold=0.5)
    assert est.counts.sum() == 0
    assert est.mbp == 0.0 and est.abp == 0.0
    np.testing.assert_allclose(est.posterior, 0.1)


def test_metadata_is_reported_with_every_estimate():
    x, y = digits([4])
    view = mean_gradient_view(x, y)
    results = [run_attack("iga", view, iterations=60, seed=s, tv_weight=1e-4) for s in range(3)]
    est = estimate_bayesian_privacy(results, POOL, threshold=0.8, smoothing=0.5, bound=3.0)
    summary = est.summary()
    assert est.counts.tolist()[4] == 3  # the attacked record wins every run
    assert (summary["runs"], summary["reconstructions"], summary["pool_size"]) == (3, 3, 10)
    assert (summary["threshold"], summary["smoothing"], summary["mbp_bound"]) == (0.8, 0.5, 3.0)
    assert summary["matched"] == 3 and summary["metric"] == "ssim"
    assert summary["within_bound"] is (est.mbp <= 3.0)


def test_counts_take_the_nearest_candidate_above_threshold():
    recon = np.stack([POOL[2], POOL[2] * 0.95, np.full_like(POOL[0], 0.5)])
    counts = candidate_counts(recon, POOL, threshold=0.5)
    assert counts.tolist() == [0, 0, 2, 0, 0, 0, 0, 0, 0, 0]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [({"threshold": 2.0}, "bayes.threshold"), ({"smoothing": -1.0}, "bayes.smoothing")],
)
def test_bad_settings(kwargs, key):
    with pytest.raises(InputError) as err:
        estimate_bayesian_privacy([POOL[:1]], POOL, **kwargs)
    assert err.value.key == key
    with pytest.raises(InputError):
        estimate_bayesian_privacy([], POOL)
