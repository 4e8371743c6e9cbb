"""ε lower bound from Clopper–Pearson intervals on a threshold test (Jagielski et al. 2020).

Guess "in" when a canary's score is ``≥ t``. If the canary's releases are (ε, δ)-DP, every
test obeys ``TPR ≤ e^ε·FPR + δ`` and ``TNR ≤ e^ε·FNR + δ`` (the DP inequality on the event
and on its complement, Kairouz et al. 2015). With a one-sided Clopper–Pearson upper bound on
``FPR`` and on ``FNR`` (hence a lower bound on ``TPR = 1 − FNR`` and ``TNR = 1 − FPR``),

    ``ε ≥ max{ log((TPR_lo − δ)/FPR_hi), log((TNR_lo − δ)/FNR_hi), 0 }``

holds with the stated confidence.

Threshold: a given ``t`` uses ``α/2`` per interval. Otherwise every empirical threshold is
tried and the intervals are made *simultaneous*: for ``FP(t) = k`` false positives the largest
``FPR`` over all such ``t`` is the ``(k+1)``-th smallest of ``n₀`` uniforms, a Beta(k+1, n₀−k)
variable whose upper ``a``-quantile is exactly the Clopper–Pearson bound; a union over
``k = 0..n₀−1`` and likewise over the ``n₁`` false-negative counts gives total error
``(n₀ + n₁)·a``, so ``a = α/(n₀ + n₁)``. (``jax_privacy.auditing`` divides by the size of
the empirical ROC frontier instead — a data-dependent count, smaller and not covered by this
argument.)

Validity assumes the canaries are independent trials given the inclusion bits — true for
separate training runs (Jagielski et al.), and for orthogonal canaries in Gaussian or Laplace
releases whose data term does not depend on the noise; only approximately in multi-round
training (the model, hence the data term, depends on earlier noise). Hence ``rigorous=False``:
:func:`~fedpriv.canaries.one_run.epsilon_one_run` needs no independence.

References
----------
.. [1] M. Jagielski, J. Ullman, A. Oprea, "Auditing differentially private machine learning:
   how private is private SGD?", NeurIPS 2020 (Clopper–Pearson ε from FPR and FNR).
.. [2] P. Kairouz, S. Oh, P. Viswanath, "The composition theorem for differential privacy",
   ICML 2015, Theorem 2.1 (the two inequalities).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.stats

from fedpriv.canaries.bound import EpsilonLowerBound, check_audit_inputs
from fedpriv.validate import number

__all__ = ["clopper_pearson_upper", "epsilon_clopper_pearson", "threshold_counts"]

ASSUMPTION = "canary trials independent given the inclusion bits (Clopper-Pearson)"


def clopper_pearson_upper(successes: Any, trials: int, alpha: float) -> np.ndarray:
    """One-sided ``1 − alpha`` Clopper–Pearson upper bound on a binomial rate.

    ``Beta.ppf(1 − alpha; k + 1, n − k)`` for ``k < n`` and 1 for ``k = n`` (Clopper & Pearson
    1934).
    """
    k = np.asarray(successes)
    safe = np.minimum(k, trials - 1)  # keeps the Beta parameters valid where k = n
    return np.where(k < trials, scipy.stats.beta.ppf(1.0 - alpha, safe + 1, trials - safe), 1.0)


def threshold_counts(
    in_scores: np.ndarray, out_scores: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(FN, FP)`` at each threshold: in-scores ``< t`` and out-scores ``≥ t``."""
    fn = np.searchsorted(np.sort(in_scores), thresholds, side="left")
    fp = out_scores.size - np.searchsorted(np.sort(out_scores), thresholds, side="left")
    return fn, fp


def _log_ratio(lower: np.ndarray, upper: np.ndarray, delta: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lower > delta, np.log(lower - delta) - np.log(upper), -np.inf)


def epsilon_clopper_pearson(
    in_scores: Any,
    out_scores: Any,
    *,
    delta: float,
    confidence: float = 0.95,
    threshold: float | None = None,
) -> EpsilonLowerBound:
    """ε lower bound at ``delta`` from Clopper–Pearson bounds (module docstring).

    Parameters
    ----------
    in_scores, out_scores
        Scores of the canaries that were in and out; higher means "in".
    delta
        The accountant's δ.
    confidence
        ``1 − α``.
    threshold
        A threshold fixed before seeing the scores; default: search all with simultaneous
        intervals.

    Returns
    -------
    EpsilonLowerBound
        ``detail``: ``threshold``, ``false_negatives``, ``false_positives``, ``direction``
        (``+1`` for the TPR/FPR inequality, ``−1`` for TNR/FNR).
    """
    ins, outs, delta, confidence = check_audit_inputs(in_scores, out_scores, delta, confidence)
    alpha = 1.0 - confidence
    if threshold is None:
        thresholds = np.append(np.union1d(ins, outs), np.inf)
        level = alpha / (ins.size + outs.size)
    else:
        thresholds = np.array([number(threshold)])
        level = alpha / 2.0
    fn, fp = threshold_counts(ins, outs, thresholds)
    fnr_hi = clopper_pearson_upper(fn, ins.size, level)
    fpr_hi = clopper_pearson_upper(fp, outs.size, level)
    candidates = np.stack([_log_ratio(1.0 - fnr_hi, fpr_hi, delta),
                           _log_ratio(1.0 - fpr_hi, fnr_hi, delta)])
    side, best = np.unravel_index(np.argmax(candidates), candidates.shape)
    eps = max(0.0, float(candidates[side, best]))
    detail = {"threshold": float(thresholds[best]), "false_negatives": int(fn[best]),
              "false_positives": int(fp[best]), "direction": 1 if side == 0 else -1,
              "interval_level": level}
    return EpsilonLowerBound(eps, delta, confidence, "clopper-pearson", False, ASSUMPTION,
                             ins.size + outs.size, detail)
