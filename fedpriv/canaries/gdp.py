"""ε at δ from a Gaussian-DP fit of canary scores: estimates, not rigorous bounds.

A mechanism is μ-GDP when every test between neighbours has
``FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ)``; μ-GDP is (ε, δ(ε))-DP for every ε ≥ 0 with the exact
``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong, Roth & Su 2022, Corollary 2.13; the
analytic Gaussian mechanism of Balle & Wang 2018, Theorem 8, with σ = 1/μ). :func:`gdp_epsilon`
inverts it with ``dp_accounting.get_epsilon_gaussian``. A single Gaussian release of a
canary present in ``k`` steps is exactly ``√k/σ``-GDP, so for every-step canaries in Gaussian
releases the conversion is exact; for other mechanisms it is a model.

Two ways to get μ from scores:

* :func:`epsilon_gdp_fit` — parametric (Andrew et al. 2024 fit Gaussians to canary cosines):
  if in- and out-scores are normal with a common variance, the test on the score itself is
  exactly ``μ = (mean_in − mean_out)/sd``-GDP and, by post-processing, the releases are no more
  private. The pooled two-sample t statistic ``T`` is non-central t with ``n₁ + n₀ − 2`` degrees
  of freedom and non-centrality ``μ/h``, ``h = √(1/n₁ + 1/n₀)``; inverting its distribution
  gives an exact one-sided confidence bound ``μ_lo`` (under the normal model).
* :func:`epsilon_gdp_thresholds` — Nasr et al. (2023): at every threshold,
  ``μ ≥ Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi)`` with simultaneous Clopper–Pearson bounds (as in
  :mod:`fedpriv.canaries.clopper_pearson`); no model of the scores, but independent canary
  trials and a Gaussian privacy profile for the conversion. ``jax_privacy``'s
  ``epsilon_from_gdp`` also maximises ``|μ|``, which uses the upper bounds in the reversed
  test where lower bounds are needed; here only the forward direction (in scores higher) is
  used.

References
----------
.. [1] J. Dong, A. Roth, W. Su, "Gaussian differential privacy", JRSS B 84(1), 2022
   (arXiv:1905.02383), Corollary 2.13 (δ(ε) of μ-GDP).
.. [2] B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy",
   ICML 2018, Theorem 8.
.. [3] M. Nasr et al., "Tight auditing of differentially private machine learning", USENIX
   Security 2023 (μ from bounds on FPR and FNR).
.. [4] G. Andrew et al., "One-shot empirical privacy estimation for federated learning",
   ICLR 2024 (Gaussian fit of canary cosines).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.optimize
import scipy.stats

from fedpriv.canaries.bound import EpsilonLowerBound, check_audit_inputs
from fedpriv.canaries.clopper_pearson import clopper_pearson_upper, threshold_counts
from fedpriv.errors import InputError
from fedpriv.validate import check_nonnegative, check_probability

__all__ = ["epsilon_gdp_fit", "epsilon_gdp_thresholds", "gdp_epsilon", "noncentral_t_lower"]

FIT_ASSUMPTION = ("in and out scores normal with a common variance, independent across "
                  "canaries; Gaussian privacy profile")
THRESHOLD_ASSUMPTION = ("canary trials independent given the inclusion bits; Gaussian privacy "
                        "profile (mu-GDP) for the conversion to epsilon")


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε at ``delta`` of a μ-GDP mechanism (module docstring); 0 for ``μ = 0``."""
    mu = check_nonnegative("mu", mu)
    delta = check_probability("delta", delta)
    if mu == 0.0:
        return 0.0
    import dp_accounting

    return float(dp_accounting.get_epsilon_gaussian(1.0 / mu, delta))


def noncentral_t_lower(t_stat: float, dof: float, alpha: float) -> float:
    """Lower ``1 − alpha`` confidence bound on the non-centrality of a non-central t.

    The ``nc`` with ``P_nc(T ≥ t_stat) = alpha`` (the survival function rises with ``nc``),
    floored at 0.
    """
    def excess(nc: float) -> float:
        return float(scipy.stats.nct.sf(t_stat, dof, nc)) - alpha

    if excess(0.0) >= 0.0:
        return 0.0
    hi = max(t_stat, 1.0)
    while excess(hi) <= 0.0:
        hi = 2.0 * hi
    return float(scipy.optimize.brentq(excess, 0.0, hi, xtol=1e-10, rtol=1e-12))


def epsilon_gdp_fit(
    in_scores: Any, out_scores: Any, *, delta: float, confidence: float = 0.95
) -> EpsilonLowerBound:
    """ε at ``delta`` from a normal fit of the scores, at ``μ_lo`` (module docstring).

    Returns
    -------
    EpsilonLowerBound
        ``detail``: ``mu_lower``, ``mu_hat`` and ``epsilon_hat`` (the point estimate),
        ``t_statistic``.
    """
    ins, outs, delta, confidence = check_audit_inputs(in_scores, out_scores, delta, confidence)
    if min(ins.size, outs.size) < 2:
        raise InputError("in_scores/out_scores", (ins.size, outs.size), "at least 2 of each")
    dof = ins.size + outs.size - 2
    pooled = math.sqrt((np.sum((ins - ins.mean()) ** 2) + np.sum((outs - outs.mean()) ** 2)) / dof)
    if pooled == 0.0:
        raise InputError("in_scores/out_scores", "constant within both groups",
                         "scores with a positive spread")
    h = math.sqrt(1.0 / ins.size + 1.0 / outs.size)
    mu_hat = float(ins.mean() - outs.mean()) / pooled
    mu_lo = h * noncentral_t_lower(mu_hat / h, dof, 1.0 - confidence)
    detail = {"mu_lower": mu_lo, "mu_hat": mu_hat, "t_statistic": mu_hat / h,
              "epsilon_hat": gdp_epsilon(max(mu_hat, 0.0), delta)}
    return EpsilonLowerBound(gdp_epsilon(mu_lo, delta), delta, confidence, "gdp-fit", False,
                             FIT_ASSUMPTION, ins.size + outs.size, detail)


def epsilon_gdp_thresholds(
    in_scores: Any, out_scores: Any, *, delta: float, confidence: float = 0.95
) -> EpsilonLowerBound:
    """ε at ``delta`` from the largest μ certified at any threshold (Nasr et al. 2023).

    Returns
    -------
    EpsilonLowerBound
        ``detail``: ``mu_lower``, ``threshold``, ``false_negatives``, ``false_positives``.
    """
    ins, outs, delta, confidence = check_audit_inputs(in_scores, out_scores, delta, confidence)
    thresholds = np.append(np.union1d(ins, outs), np.inf)
    level = (1.0 - confidence) / (ins.size + outs.size)
    fn, fp = threshold_counts(ins, outs, thresholds)
    fnr_hi = clopper_pearson_upper(fn, ins.size, level)
    fpr_hi = clopper_pearson_upper(fp, outs.size, level)
    mus = scipy.stats.norm.isf(fpr_hi) - scipy.stats.norm.ppf(fnr_hi)
    best = int(np.argmax(mus))
    mu_lo = max(0.0, float(mus[best]))
    detail = {"mu_lower": mu_lo, "threshold": float(thresholds[best]),
              "false_negatives": int(fn[best]), "false_positives": int(fp[best]),
              "interval_level": level}
    return EpsilonLowerBound(gdp_epsilon(mu_lo, delta), delta, confidence, "gdp-thresholds",
                             False, THRESHOLD_ASSUMPTION, ins.size + outs.size, detail)
