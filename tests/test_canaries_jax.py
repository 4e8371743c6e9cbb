"""fedpriv.canaries against DeepMind's ``jax_privacy.auditing`` on the same scores.

Optional: skipped unless ``jax_privacy`` is importable. It is not a dependency (its package
pulls in jax, jaxlib, optax, chex); run the comparison from a separate environment:

    python3 -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax-privacy pytest
    PYTHONPATH=. /tmp/jaxvenv/bin/python -m pytest -q -p no:cacheprovider --noconftest \\
        tests/test_canaries_jax.py

Where the two define the search differently (fedpriv corrects by the number of possible
counts or a fixed grid of k; jax_privacy by the size of the empirical ROC frontier), the
comparison puts both at the same per-interval level or the same fixed threshold.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

auditing = pytest.importorskip(
    "jax_privacy.auditing", reason="jax_privacy is not installed: optional comparison"
)

from fedpriv.canaries import (  # noqa: E402 (after the optional import)
    epsilon_clopper_pearson,
    epsilon_gdp_thresholds,
    epsilon_one_run,
    one_run_p_value,
)

ALPHA, DELTA = 0.05, 1e-5


def _scores(mu: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    bits = rng.random(n) < 0.5
    z = rng.normal(0.0, 1.0, n) + mu * bits
    return z[bits], z[~bits]


CASES = [(0.5, 400, 0), (1.0, 400, 1), (2.0, 400, 2), (1.0, 2_000, 3)]


@pytest.mark.parametrize(("m", "r", "v"), [(1_000, 100, 90), (1_000, 500, 400), (200, 200, 150),
                                           (5_000, 40, 40)])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("delta", [0.0, 1e-5, 1e-3])
def test_one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> None:
    ours = one_run_p_value(m, r, v, eps, delta)
    assert ours == pytest.approx(auditing._one_run_p_value(m, r, v, eps, delta), rel=1e-12)


@pytest.mark.parametrize(("mu", "n", "seed"), CASES)
def test_clopper_pearson_at_fixed_thresholds(mu: float, n: int, seed: int) -> None:
    ins, outs = _scores(mu, n, seed)
    auditor = auditing.CanaryScoreAuditor(ins, outs)
    for t in np.quantile(outs, [0.5, 0.9, 0.99]):
        ours = epsilon_clopper_pearson(ins, outs, delta=DELTA, threshold=t).epsilon
        theirs = auditor.epsilon_clopper_pearson(
            ALPHA, DELTA, one_sided=False, threshold_strategy=auditing.Explicit(t))
        assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize(("mu", "n", "seed"), CASES[:3])
def test_clopper_pearson_search_is_the_best_fixed_threshold(mu: float, n: int,
                                                           seed: int) -> None:
    """Our search = max over every threshold of jax_privacy's fixed-threshold bound at our
    per-interval level α/n (jax_privacy's Explicit spends significance/2 per interval)."""
    ins, outs = _scores(mu, n, seed)
    auditor = auditing.CanaryScoreAuditor(ins, outs)
    thresholds = np.append(np.union1d(ins, outs), np.inf)
    theirs = max(auditor.epsilon_clopper_pearson(2 * ALPHA / n, DELTA, one_sided=False,
                                                 threshold_strategy=auditing.Explicit(t))
                 for t in thresholds)
    assert epsilon_clopper_pearson(ins, outs, delta=DELTA).epsilon == pytest.approx(theirs,
                                                                                   abs=1e-12)


@pytest.mark.parametrize(("mu", "n", "seed"), CASES)
@pytest.mark.parametrize("k", [5, 20, 100])
def test_one_run_with_fixed_guesses(mu: float, n: int, seed: int, k: int) -> None:
    """Top-k guesses = jax_privacy's guesses at the k-th largest score as threshold."""
    ins, outs = _scores(mu, n, seed)
    auditor = auditing.CanaryScoreAuditor(ins, outs)
    t = np.sort(np.concatenate([ins, outs]))[-k]
    ours = epsilon_one_run(ins, outs, delta=DELTA, guesses=k, two_sided=False).epsilon
    theirs = auditor.epsilon_one_run(ALPHA, DELTA, threshold_strategy=auditing.Explicit(t))
    assert ours == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize(("mu", "n", "seed"), CASES)
def test_gdp_thresholds_mu_from_jax_building_blocks(mu: float, n: int, seed: int) -> None:
    """μ_lo = max over thresholds of ``Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi)``, here from
    jax_privacy's own counts (its ROC frontier) and Clopper–Pearson bounds at our level α/n,
    forward direction only (see the last test)."""
    ins, outs = _scores(mu, n, seed)
    auditor = auditing.CanaryScoreAuditor(ins, outs)
    fn, tn = auditor._fn_counts, auditor._tn_counts
    fnr_hi = auditing._clopper_pearson_upper(fn, fn[-1], ALPHA / n)
    fpr_hi = auditing._clopper_pearson_upper(tn[-1] - tn, tn[-1], ALPHA / n)
    theirs = max(0.0, float(np.max(norm.isf(fpr_hi) - norm.ppf(fnr_hi))))
    ours = epsilon_gdp_thresholds(ins, outs, delta=DELTA).detail["mu_lower"]
    assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize(("mu", "n", "seed"), [(2.0, 400, 2), (3.0, 1_000, 4)])
def test_gdp_thresholds_epsilon_where_jax_takes_the_forward_test(mu: float, n: int,
                                                                 seed: int) -> None:
    """At the same per-interval level (jax_privacy spends significance/(2·frontier) per
    interval) and where its largest |μ| is the forward one: the same ε up to root-finding
    tolerance (ours 1e-12, theirs 1e-6)."""
    ins, outs = _scores(mu, n, seed)
    auditor = auditing.CanaryScoreAuditor(ins, outs)
    frontier = len(auditor._fn_counts)
    theirs = auditor.epsilon_from_gdp(2 * frontier * ALPHA / n, DELTA)
    assert epsilon_gdp_thresholds(ins, outs, delta=DELTA).epsilon == pytest.approx(theirs,
                                                                                  abs=1e-5)


def test_jax_gdp_estimate_is_positive_without_any_signal() -> None:
    """A difference we keep: jax_privacy's ``epsilon_from_gdp`` maximises ``|μ|`` and so also
    credits the reversed test, where its upper bounds on FPR and FNR are the wrong bounds. On
    scores with no signal at all (true ε = 0) it reports ε > 0 in most runs — far above its
    5% significance — while ours reports 0 in all. If this starts failing, jax_privacy has
    changed; revisit the note in docs/canaries.md. (With 400 canaries and n = 1e-5 the
    spurious |μ| comes from thresholds with nearly every out-score above them.)"""
    jax_positive, ours_positive = 0, 0
    for seed in range(40):
        ins, outs = _scores(0.0, 400, 100 + seed)
        jax_positive += auditing.CanaryScoreAuditor(ins, outs).epsilon_from_gdp(ALPHA, DELTA) > 0
        ours_positive += epsilon_gdp_thresholds(ins, outs, delta=DELTA).epsilon > 0
    assert jax_positive >= 30 and ours_positive <= 6
