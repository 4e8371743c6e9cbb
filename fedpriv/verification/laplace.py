"""``laplace``: does the update carry the declared Laplace noise? (privacy-math.md §9.3)

``u = L·Σ_t r_t = Σ_t S_t + N`` with ``N = b·V``, ``V_i`` the sum of ``k`` iid Laplace(1),
``b = λC``, and ℓ1 clipping ``‖Σ_t S_t‖₁ ≤ C·B``.

* :func:`laplace_norm_test` — the ℓ1 sandwich: ``‖V‖₁ ~ Gamma(p, 1)`` for ``k = 1`` (exact);
  for ``k > 1`` a Chernoff bound with the exact MGF of ``|Σ_k Laplace(1)|``
  (:func:`~fedpriv.verification.laws.log_mgf_abs_laplace_sum`). The low side also uses the
  last step alone (Anderson; ``Gamma(p, 1)``), which needs no bound on ``B``.
* :func:`laplace_shape_test` — the noise law: Gaussian noise with the same ``E|N_i|`` has a
  smaller ℓ2 norm (``sd = b·sqrt(π/2) ≈ 1.25b`` against ``√2·b ≈ 1.41b``). One-sided ℓ2 test on
  one step's noise, ``k = 1`` only.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fedpriv.validate import check_dim, check_nonnegative, check_positive, check_probability
from fedpriv.verification.gaussian import LAW
from fedpriv.verification.laws import (
    excess_kurtosis,
    laplace_l1_law,
    laplace_l2_law,
    lower_quantile,
)
from fedpriv.verification.power import laplace_detectable_fraction, laplace_signal_power
from fedpriv.verification.records import RecordCount
from fedpriv.verification.roundoff import ROUNDOFF_RISK, gamma_roundoff_quantile, norm_tolerance
from fedpriv.verification.sandwich import (
    NoiseNorm,
    norm_verdict,
)
from fedpriv.verification.update import ClientUpdate
from fedpriv.verification.verdict import (
    DEFAULT_ALPHA,
    Verdict,
    combine_verdicts,
    decide,
    unverifiable,
)

__all__ = ["laplace_norm_test", "laplace_shape_test", "verify_laplace"]


def laplace_norm_test(
    norm: float,
    *,
    dim: int,
    noise_scale: float,
    steps: int,
    clip_bound: float,
    records: RecordCount,
    alpha: float = DEFAULT_ALPHA,
    slack: float = 0.0,
) -> Verdict:
    """Two-sided test of ``‖u‖₁`` against Laplace noise of scale ``b`` per step.

    Rejects when ``‖u‖₁ < max(b·G(α/2), b·Q_k(α/2) − C·B)`` or ``‖u‖₁ > b·Q_k(1 − α/2) + C·B``,
    ``G`` the quantiles of ``Gamma(p, 1)`` and ``Q_k`` those of ``‖V‖₁`` (bounded by Chernoff
    for ``k > 1``); p-value as in :func:`~fedpriv.verification.gaussian.gaussian_norm_test`.

    Parameters
    ----------
    norm
        ``‖u‖₁``.
    dim, steps
        ``p`` and ``k``.
    noise_scale
        ``b = λ·C``, the Laplace scale of one step's noise on the sum.
    clip_bound
        ``C`` (ℓ1, including any float tolerance).
    records, alpha, slack
        The law of ``B``, the false-alarm rate and the rounding tolerance on ``norm``.
    """
    x, p, k = check_nonnegative("norm", norm), check_dim("dim", dim), check_dim("steps", steps)
    b, c = check_positive("noise_scale", noise_scale), check_positive("clip_bound", clip_bound)
    a, tol = check_probability("alpha", alpha), check_nonnegative("slack", slack)
    noise = NoiseNorm(laplace_l1_law(p, k), b, laplace_l1_law(p, 1), b, k)
    return norm_verdict("laplace-norm", x, noise, c, records, tol, a, norm="‖u‖₁",
                        declared=f"Laplace b = {b:.4g}", statistic={"noise_scale": b})


def laplace_shape_test(
    noisy_sum: np.ndarray,
    *,
    noise_scale: float,
    steps: int,
    clip_bound: float,
    records: RecordCount,
    alpha: float = DEFAULT_ALPHA,
    slack: float = 0.0,
) -> Verdict:
    """One-sided test that the noise is not lighter-tailed than Laplace, through ``‖u‖₂``.

    ``k = 1`` only: rejects when ``‖u‖₂ < b·Q(α)``, ``Q`` the lower quantile of ``‖V‖₂``
    (Chernoff with :func:`~fedpriv.verification.laws.log_mgf_laplace_square`); by Anderson no
    signal term enters. *Applicable* when Gaussian noise with the same ``E|N_i| = b`` and an
    independent signal of ℓ2 norm ``≤ C·B`` would fall below the threshold:
    ``p·(π/2)·b² + (C·B)² < (b·Q(α))²``. The excess kurtosis is reported as a description.
    For ``k > 1`` the test would need the lower tail of ``‖Σ_k Laplace‖₂``: unverifiable.
    """
    u = np.asarray(noisy_sum, dtype=np.float64).ravel()
    p, k = check_dim("dim", u.size), check_dim("steps", steps)
    b, c = check_positive("noise_scale", noise_scale), check_positive("clip_bound", clip_bound)
    a, tol = check_probability("alpha", alpha), check_nonnegative("slack", slack)
    x = float(np.linalg.norm(u))
    statistic = {
        "l2_norm": x,
        "expected_l2_norm": b * math.sqrt(2.0 * p),
        "excess_kurtosis": excess_kurtosis(u),
    }
    if k > 1:
        return unverifiable("laplace-shape", f"not applicable for k = {k} > 1 steps", statistic,
                            LAW)
    law = laplace_l2_law(p)
    p_value = law.cdf((x + tol) / b)
    verdict = decide(
        "laplace-shape",
        p_value,
        a,
        statistic,
        passed=f"‖u‖₂ = {x:.6g} fits Laplace noise",
        failed=f"‖u‖₂ = {x:.6g} is too small for Laplace noise of b = {b:.4g}: lighter tails",
        speaks_to=LAW,
    )
    threshold = b * lower_quantile(law, a, math.sqrt(2.0 * p))
    signal = c * records.upper_quantile(a / 2)
    if verdict.status == "consistent" and p * math.pi / 2 * b * b + signal**2 >= threshold**2:
        return unverifiable(
            "laplace-shape",
            "not applicable: a signal of C·B could hide Gaussian noise of the same mean size",
            {**statistic, "p_value": p_value}, LAW,
        )
    return verdict


def verify_laplace(
    update: ClientUpdate,
    *,
    laplace_scale: float,
    clip_bound: float,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """The ``laplace`` mechanism's checks on a recovered update (``b = λ·C``, ℓ1 clipping to
    ``C``): norm and shape tests, combined, with the float tolerances of
    :func:`~fedpriv.verification.gaussian.verify_gaussian`."""
    lam = check_positive("laplace_scale", laplace_scale)
    c = check_positive("clip_bound", clip_bound)
    p, k, records = update.dim, update.steps, update.records
    most = records.upper_quantile(ROUNDOFF_RISK)
    c_float = c * (1.0 + norm_tolerance(p, most, update.unit_roundoff))
    b = lam * c
    step1 = (b * gamma_roundoff_quantile(p) + c_float * most) / update.batch_size
    u = update.noisy_sum
    slack1 = update.batch_size * update.summed_error(1, step1)
    slack2 = update.batch_size * update.summed_error(2, step1)  # ‖·‖₂ ≤ ‖·‖₁
    common = {"steps": k, "clip_bound": c_float, "records": records, "alpha": alpha}
    norm = laplace_norm_test(
        float(np.sum(np.abs(u))), dim=p, noise_scale=b, slack=slack1, **common
    )
    ratio = c_float * records.upper_quantile(alpha / 2) / b  # C·B/b for the power figures
    norm = dataclasses.replace(norm, statistic={
        **norm.statistic,
        "detectable_fraction": laplace_detectable_fraction(dim=p, scale_records=ratio, steps=k,
                                                           alpha=alpha),
        "signal_power": laplace_signal_power(dim=p, scale_records=ratio, steps=k, alpha=alpha),
    })
    shape = laplace_shape_test(u, noise_scale=b, slack=slack2, **common)
    return combine_verdicts([norm, shape], test="laplace")
