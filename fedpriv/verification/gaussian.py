"""``gaussian``: does the update carry the declared Gaussian noise? (privacy-math.md §9.2)

``u = L·Σ_t r_t = Σ_t S_t + N`` with ``N = σC·W``, ``W ~ N(0, k·I_p)``, ``‖Σ_t S_t‖₂ ≤ C·B``.

* :func:`gaussian_norm_test` — the ℓ2 sandwich: ``‖N‖₂/(σC√k) ~ χ_p`` exactly; the low side
  also uses the last step alone (``‖u‖₂ ≥_st σC·χ_p``, Anderson), which needs no bound on ``B``
  and at ``k = 1`` is the whole low side: ``reject if ‖u‖₂ < σC·χ_p(α/2)``.
* :func:`gaussian_shape_test` — the noise law (what the excess kurtosis would check): a
  heavier-tailed noise of the same variance has a smaller ℓ1 norm, ``E|Z| = 0.798`` against
  ``E|L|/sd(L) = 0.707`` for Laplace. One-sided ℓ1 test with the Chernoff law of ``Σ_i |Z_i|``;
  the ℓ1 signal term ``√p·C·B`` is huge, but the last-step bound does without it.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special, stats

from fedpriv.validate import check_dim, check_nonnegative, check_positive, check_probability
from fedpriv.verification.clip import verify_clip
from fedpriv.verification.laws import (
    excess_kurtosis,
    gaussian_l1_law,
    gaussian_l2_law,
    lower_quantile,
    mean_abs_laplace_sum,
)
from fedpriv.verification.records import RecordCount
from fedpriv.verification.roundoff import ROUNDOFF_RISK, norm_tolerance
from fedpriv.verification.sandwich import (
    NoiseNorm,
    low_tail,
    norm_verdict,
    one_sided_p_value,
)
from fedpriv.verification.update import ClientUpdate
from fedpriv.verification.verdict import (
    DEFAULT_ALPHA,
    Verdict,
    combine_verdicts,
    decide,
    unverifiable,
)

__all__ = ["gaussian_norm_test", "gaussian_shape_test", "verify_gaussian"]


def gaussian_norm_test(
    norm: float,
    *,
    dim: int,
    noise_std: float,
    steps: int,
    clip_bound: float,
    records: RecordCount,
    alpha: float = DEFAULT_ALPHA,
    slack: float = 0.0,
) -> Verdict:
    """Two-sided test of ``‖u‖₂`` against Gaussian noise of std ``σC`` per step.

    Rejects when ``‖u‖₂ < max(σC·a, σC√k·a − C·B)`` or ``‖u‖₂ > σC√k·b + C·B``, ``a``, ``b`` the
    ``α/2`` and ``1 − α/2`` quantiles of ``χ_p`` (privacy-math.md §9.2). The p-value is
    ``min(1, 2·min(p_low, p_high))``; a side that needs ``B`` under Poisson sampling spends half
    its level on ``B`` (:func:`~fedpriv.verification.sandwich.one_sided_p_value`).

    Parameters
    ----------
    norm
        ``‖u‖₂``, ``u = L·Σ_t r_t``.
    dim
        ``p``.
    noise_std
        ``σ·C``, the std of one step's noise on the sum.
    steps
        ``k``.
    clip_bound
        ``C`` (ℓ2, including any float tolerance).
    records
        The law of ``B``.
    alpha
        False-alarm rate.
    slack
        Rounding tolerance on ``norm`` (moves each threshold outwards).
    """
    x, p, k = check_nonnegative("norm", norm), check_dim("dim", dim), check_dim("steps", steps)
    s, c = check_positive("noise_std", noise_std), check_positive("clip_bound", clip_bound)
    a, tol = check_probability("alpha", alpha), check_nonnegative("slack", slack)
    law = gaussian_l2_law(p)
    noise = NoiseNorm(law, s * math.sqrt(k), law, s, k)
    statistic = {"noise_scale": noise.scale, "expected_noise_norm": noise.scale * math.sqrt(p)}
    return norm_verdict("gaussian-norm", x, noise, c, records, tol, a, norm="‖u‖₂",
                        declared=f"σC = {s:.4g}", statistic=statistic)


def gaussian_shape_test(
    noisy_sum: np.ndarray,
    *,
    noise_std: float,
    steps: int,
    clip_bound: float,
    records: RecordCount,
    alpha: float = DEFAULT_ALPHA,
    slack: float = 0.0,
) -> Verdict:
    """One-sided test that the noise is not heavier-tailed than Gaussian, through ``‖u‖₁``.

    Rejects when ``‖u‖₁ < max(σC·Q(α), σC√k·Q(α) − √p·C·B)``, ``Q`` the lower quantile of
    ``Σ_i |Z_i|`` by Chernoff. Sound for every signal; *applicable* (reported, not required)
    when Laplace noise of the same variance would be caught: its ``E‖N‖₁ = p·β·m_k``
    (``β = σC/√2``, ``m_k = E|Σ_k Laplace(1)|``) plus the largest shift an independent signal
    causes, ``f(0)·(C·B)²`` (``E|x + V| − E|V| ≤ f(0)x²`` for symmetric unimodal ``V``), falls
    below the threshold. The excess kurtosis of the coordinates is reported as a description.

    Parameters
    ----------
    noisy_sum
        ``u = L·Σ_t r_t``, shape ``(p,)``.
    noise_std, steps, clip_bound, records, alpha, slack
        As in :func:`gaussian_norm_test` (``slack`` in ℓ1).
    """
    u = np.asarray(noisy_sum, dtype=np.float64).ravel()
    p, k = check_dim("dim", u.size), check_dim("steps", steps)
    s, c = check_positive("noise_std", noise_std), check_positive("clip_bound", clip_bound)
    a, tol = check_probability("alpha", alpha), check_nonnegative("slack", slack)
    x = float(np.sum(np.abs(u)))
    law = gaussian_l1_law(p)
    noise = NoiseNorm(law, s * math.sqrt(k), law, s, k)
    per_record = math.sqrt(p) * c  # ‖s‖₁ ≤ √p ‖s‖₂
    p_value, _ = one_sided_p_value(
        lambda b: low_tail(x + tol, noise, per_record * b), records, k > 1
    )
    statistic = {
        "l1_norm": x,
        "expected_l1_norm": noise.scale * p * math.sqrt(2.0 / math.pi),
        "excess_kurtosis": excess_kurtosis(u),
        "kurtosis_standard_error": math.sqrt(24.0 / p),
    }
    verdict = decide(
        "gaussian-shape",
        p_value,
        a,
        statistic,
        passed=f"‖u‖₁ = {x:.6g} fits Gaussian noise",
        failed=f"‖u‖₁ = {x:.6g} is too small for Gaussian noise of σC = {s:.4g}: heavier tails",
    )
    if verdict.status == "consistent" and not _shape_applicable(p, noise, records, c, a):
        return unverifiable(
            "gaussian-shape",
            "not applicable: a signal of C·B could hide Laplace noise of the declared variance",
            {**statistic, "p_value": p_value},
        )
    return verdict


@lru_cache(maxsize=256)
def _shape_applicable(
    p: int, noise: NoiseNorm, records: RecordCount, clip: float, alpha: float
) -> bool:
    """Whether variance-matched Laplace noise plus an independent signal of norm ``C·B`` would
    fall below the test's threshold (the test's power is then at least about one half). Kept
    per argument (all frozen): it depends on the declaration alone, which replies share."""
    k = noise.steps
    top = p * math.sqrt(2.0 / math.pi)
    quantile = lower_quantile(noise.law, alpha, top)
    b = records.upper_quantile(alpha / 2)
    threshold = max(noise.step_scale * quantile, noise.scale * quantile - math.sqrt(p) * clip * b)
    beta = noise.step_scale / math.sqrt(2.0)
    density_at_zero = math.exp(
        special.gammaln(2 * k - 1) - 2 * special.gammaln(k) - (2 * k - 1) * math.log(2.0)
    ) / beta
    alternative = p * beta * mean_abs_laplace_sum(k) + density_at_zero * (clip * b) ** 2
    return alternative < threshold


@lru_cache(maxsize=64)
def _chi_roundoff_quantile(p: int) -> float:
    """``χ_p`` at its ``1 − ROUNDOFF_RISK`` quantile (kept per ``p``: scipy's ``isf`` costs more
    than the rest of a reply's check)."""
    return math.sqrt(float(stats.chi2.isf(ROUNDOFF_RISK, p)))


def verify_gaussian(
    update: ClientUpdate,
    *,
    noise_multiplier: float,
    clip_bound: float,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """The ``gaussian`` mechanism's checks on a recovered update: norm and shape tests,
    combined; ``σ = 0`` (no formal guarantee) is checked like ``clip``.

    The clipping bound is widened by the float32 tolerance
    :func:`~fedpriv.verification.roundoff.norm_tolerance` and each norm by the rounding slack
    of the parameter round trip (one step's noise norm taken at its ``1 − 10⁻¹⁵`` quantile).
    """
    sigma = check_nonnegative("noise_multiplier", noise_multiplier)
    c = check_positive("clip_bound", clip_bound)
    if sigma == 0:
        return verify_clip(update, clip_bound=c, alpha=alpha)
    p, k, records = update.dim, update.steps, update.records
    most = records.upper_quantile(ROUNDOFF_RISK)
    c_float = c * (1.0 + norm_tolerance(p, most, update.unit_roundoff))
    noise_std = sigma * c
    step_noise = noise_std * _chi_roundoff_quantile(p)
    step2 = (step_noise + c_float * most) / update.batch_size
    u = update.noisy_sum
    slack2 = update.batch_size * update.summed_error(2, step2)
    slack1 = update.batch_size * update.summed_error(1, math.sqrt(p) * step2)
    common = {"steps": k, "clip_bound": c_float, "records": records, "alpha": alpha}
    norm = gaussian_norm_test(
        float(np.linalg.norm(u)), dim=p, noise_std=noise_std, slack=slack2, **common
    )
    shape = gaussian_shape_test(u, noise_std=noise_std, slack=slack1, **common)
    return combine_verdicts([norm, shape], test="gaussian")
