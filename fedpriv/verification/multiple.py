"""Many client-rounds, many tests: adjusted p-values (privacy-math.md §9.8).

A run checks every client in every round; at ``α = 10⁻⁶`` per test and 10⁴ client-rounds
about 0.01–0.04 false "inconsistent" labels are expected, and the report should bound that
explicitly. The report uses **Holm** (family-wise error rate): an "inconsistent" label accuses
one client of a false declaration, so the guarantee wanted is that with probability
``≥ 1 − α`` *no* honest client-round is accused in the whole run. Holm gives that under any
dependence between the p-values (the rounds of one client share its declaration and its model
trajectory) and rejects everything Bonferroni does. Benjamini–Hochberg controls the expected
*fraction* of false accusations among the accusations — fit for screening which clients to
look at, not for labelling; it needs independent or positively dependent p-values.

References
----------
.. [1] S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist.
   6(2), 65–70, 1979.
.. [2] Y. Benjamini, Y. Hochberg, "Controlling the false discovery rate", J. R. Statist. Soc. B
   57(1), 289–300, 1995 (through ``scipy.stats.false_discovery_control``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from fedpriv.errors import InputError
from fedpriv.validate import check_probability

__all__ = ["ADJUSTMENTS", "benjamini_hochberg", "bonferroni", "flag_inconsistent", "holm"]


def _p_values(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64).ravel()
    if not np.all((p >= 0) & (p <= 1)):  # also refuses NaN
        raise InputError("p_values", p_values, "numbers in [0, 1]")
    return p


def bonferroni(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Bonferroni-adjusted p-values ``min(1, m·p_i)`` (family-wise, any dependence)."""
    p = _p_values(p_values)
    return np.minimum(1.0, p.size * p)


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise, any dependence).

    With ``p_(1) ≤ … ≤ p_(m)``: ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j))``; rejecting
    ``p̃_i ≤ α`` is Holm's procedure at level ``α``. Written here because scipy has no Holm.
    """
    p = _p_values(p_values)
    order = np.argsort(p, kind="stable")
    factors = p.size - np.arange(p.size)
    adjusted = np.maximum.accumulate(np.minimum(1.0, factors * p[order]))
    out = np.empty_like(p)
    out[order] = adjusted
    return out


def benjamini_hochberg(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false-discovery rate; independent or positively
    dependent p-values)."""
    p = _p_values(p_values)
    return stats.false_discovery_control(p, method="bh") if p.size else p


ADJUSTMENTS: Mapping[str, Callable[[Sequence[float] | np.ndarray], np.ndarray]] = {
    "bonferroni": bonferroni,
    "holm": holm,
    "bh": benjamini_hochberg,
}


def flag_inconsistent(
    p_values: Sequence[float] | np.ndarray, alpha: float, method: str = "holm"
) -> np.ndarray:
    """Which client-rounds to label inconsistent at family level ``alpha``: adjusted ``p ≤ α``.

    Parameters
    ----------
    p_values
        One p-value per client-round (the combined verdicts' ``p_value``; leave out the
        unverifiable ones, which have none).
    alpha
        Family-wise error rate (``"holm"``, ``"bonferroni"``) or false-discovery rate (``"bh"``).
    method
        A key of :data:`ADJUSTMENTS`.
    """
    if method not in ADJUSTMENTS:
        raise InputError("method", method, f"one of {sorted(ADJUSTMENTS)}")
    return ADJUSTMENTS[method](p_values) <= check_probability("alpha", alpha)
