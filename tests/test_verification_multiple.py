"""Multiple-testing adjustments (privacy-math.md §9.8) against the step-down and step-up
procedures written as loops, straight from Holm (1979) and Benjamini–Hochberg (1995)."""

from __future__ import annotations

import numpy as np
import pytest

from fedpriv.errors import InputError
from fedpriv.verification import benjamini_hochberg, bonferroni, flag_inconsistent, holm


def _holm_loop(p: np.ndarray, alpha: float) -> np.ndarray:
    """Reject p_(1), p_(2), … while p_(i) ≤ α/(m − i + 1); stop at the first that is not."""
    order, m = np.argsort(p, kind="stable"), p.size
    rejected = np.zeros(m, bool)
    for i, j in enumerate(order):
        if p[j] > alpha / (m - i):
            break
        rejected[j] = True
    return rejected


def _bh_loop(p: np.ndarray, alpha: float) -> np.ndarray:
    """Reject the i* smallest, i* the largest i with p_(i) ≤ iα/m."""
    order, m = np.argsort(p, kind="stable"), p.size
    below = [i + 1 for i in range(m) if p[order[i]] <= (i + 1) * alpha / m]
    rejected = np.zeros(m, bool)
    rejected[order[: max(below, default=0)]] = True
    return rejected


@pytest.mark.parametrize("seed", range(20))
def test_adjusted_p_values_reproduce_the_procedures(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    p = np.where(rng.random(m) < 0.3, rng.random(m) * 1e-3, rng.random(m))
    p[: m // 4] = p[0]  # ties
    for alpha in (1e-4, 1e-3, 0.01, 0.05, 0.2):
        assert np.array_equal(holm(p) <= alpha, _holm_loop(p, alpha))
        assert np.array_equal(benjamini_hochberg(p) <= alpha, _bh_loop(p, alpha))
        assert np.array_equal(flag_inconsistent(p, alpha), _holm_loop(p, alpha))
    assert np.all(p <= holm(p)) and np.all(holm(p) <= bonferroni(p))
    assert np.all(benjamini_hochberg(p) <= holm(p) + 1e-15)


def test_holm_known_values():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 → 4·0.005, 3·0.01, max(2·0.03, ·), max(1·0.04, 0.06)
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert bonferroni(p) == pytest.approx([0.04, 0.16, 0.12, 0.02])


def test_bad_p_values_and_methods_are_refused():
    for bad in ([0.1, 1.5], [np.nan], [-0.1]):
        with pytest.raises(InputError):
            holm(bad)
    with pytest.raises(InputError):
        flag_inconsistent([0.1], 0.05, method="fdr")
    with pytest.raises(InputError):
        flag_inconsistent([0.1], 0.0)
    assert holm([]).size == 0 and benjamini_hochberg([]).size == 0
