"""``gaussian``: does the update carry the declared Gaussian noise? (privacy-math.md §9.2)

``u = L·Σ_t r_t = Σ_t S_t + N`` with ``N = σC·W``, ``W ~ N(0, k·I_p)``, ``‖Σ_t S_t‖₂ ≤ C·B``.

* :func:`gaussian_norm_test` — the ℓ2 sandwich: ``‖N‖₂/(σC√k) ~ χ_p`` exactly; the low side
  also uses the last step alone (``‖u‖₂ ≥_st σC·χ_p``, Anderson), which needs no bound on ``B``
  and at ``k = 1`` is the whole low side: ``reject if ‖u‖₂ < σC·χ_p(α/2)``.
* :func:`gaussian_shape_test` — the noise law (what the excess kurtosis would check): a
  heavier-tailed noise of the same variance has a smaller ℓ1 norm, ``E|Z| = 0.798`` against
  ``E|L|/sd(L) = 0.707`` for Laplace. One-sided ℓ1 test with the Chernoff law of ``Σ_i |Z_i|``;
  the ℓ1 signal term ``√p·C·B`` is huge, but the last-step bound does without it.
* :func:`gaussian_light_tail_test` — the other side of the noise law: lighter-tailed or bounded
  noise of the declared variance (uniform, Rademacher: no DP at all) has too little mass
  beyond ``τ = 2`` standard deviations. Together the two are a two-sided test of the law.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import special

from fedpriv.validate import check_dim, check_nonnegative, check_positive, check_probability
from fedpriv.verification.clip import verify_clip
from fedpriv.verification.laws import (
    excess_kurtosis,
    gaussian_excess_law,
    gaussian_l1_law,
    gaussian_l2_law,
    lower_quantile,
    mean_abs_laplace_sum,
)
from fedpriv.verification.power import (
    SIGNAL_FACTOR,
    gaussian_detectable_fraction,
    gaussian_signal_power,
)
from fedpriv.verification.records import RecordCount
from fedpriv.verification.roundoff import ROUNDOFF_RISK, chi_roundoff_quantile, norm_tolerance
from fedpriv.verification.sandwich import (
    NoiseNorm,
    SandwichResult,
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

__all__ = ["LIGHT_TAIL_CUT", "gaussian_light_tail_test", "gaussian_norm_test",
           "gaussian_shape_test", "tail_excesses", "verify_gaussian"]

LAW = ("noise-law",)
"""The property both sides of the noise law speak to (:class:`~fedpriv.verification.Verdict`)."""

LIGHT_TAIL_CUT = 2.0
"""``τ`` of :func:`gaussian_light_tail_test`, in standard deviations of one step's noise. At
p = 13,700 and α = 10⁻⁶ the Gaussian mean of the statistic is 232.6 and its lower quantile 171.6;
τ = 2 about maximises the applicable range ``4(τ − √3)·Q(τ)`` (B < 13.6σ; 12.5σ at τ = 1.9,
13.0σ at 2.2, 10.7σ at 2.4)."""
_BOUNDED = math.sqrt(3.0)  # uniform noise of unit variance lies in [−√3, √3]


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
    result: SandwichResult | None = None,
) -> Verdict:
    """Two-sided test of ``‖u‖₂`` against Gaussian noise of std ``σC`` per step.

    Rejects when ``‖u‖₂ < max(σC·a, σC√k·a − C·B)`` or ``‖u‖₂ > σC√k·b + C·B``, ``a``, ``b`` the
    ``α/2`` and ``1 − α/2`` quantiles of ``χ_p`` (privacy-math.md §9.2). At ``k = 1`` the high
    side combines the signal and the noise in quadrature instead: rejects when
    ``(‖u‖₂/σC)² > ncχ²_p((B/σ)²)``'s ``1 − α/2`` quantile (the signal is computed before the
    noise is drawn, so ``⟨S, N⟩`` is centred Gaussian given ``S``;
    :mod:`~fedpriv.verification.sandwich`), about ``σC·√(p + (B/σ)²)`` instead of
    ``σC√p + C·B``. The p-value is
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
    result
        The :func:`~fedpriv.verification.sandwich.sandwich` of :func:`l2_noise`, where the
        caller computed it for many replies at once (:mod:`~fedpriv.verification.gaussian_batch`).
    """
    x, p, k = check_nonnegative("norm", norm), check_dim("dim", dim), check_dim("steps", steps)
    s, c = check_positive("noise_std", noise_std), check_positive("clip_bound", clip_bound)
    a, tol = check_probability("alpha", alpha), check_nonnegative("slack", slack)
    noise = l2_noise(p, s, k)
    statistic = {"noise_scale": noise.scale, "expected_noise_norm": noise.scale * math.sqrt(p)}
    return norm_verdict("gaussian-norm", x, noise, c, records, tol, a, norm="‖u‖₂",
                        declared=f"σC = {s:.4g}", statistic=statistic, result=result)


def l2_noise(dim: int, noise_std: float, steps: int) -> NoiseNorm:
    """The law of the Gaussian noise's ℓ2 norm over ``k`` steps of std ``σC`` per coordinate
    and step, and of the last step's alone (:func:`gaussian_norm_test`)."""
    law = gaussian_l2_law(dim)
    return NoiseNorm(law, noise_std * math.sqrt(steps), law, noise_std, steps,
                     shifted_sf=law.sf_shifted)


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
    return shape_verdict(float(np.sum(np.abs(u))), excess_kurtosis(u), p, noise_std=s, steps=k,
                         clip_bound=c, records=records, alpha=a, slack=tol)


def shape_p_value(l1_norm: float, noise: NoiseNorm, per_record: float, records: RecordCount,
                  slack: float) -> float:
    """The p-value of :func:`gaussian_shape_test`: the low tail of ``‖u‖₁`` (widened by
    ``slack``) with ``noise`` its :func:`l1_noise` and a signal of ``per_record = √p·C`` per
    record."""
    k = noise.steps
    return one_sided_p_value(
        lambda b: low_tail(l1_norm + slack, noise, per_record * b), records, k > 1
    )[0]


def l1_noise(dim: int, noise_std: float, steps: int) -> NoiseNorm:
    """The law of the Gaussian noise's ℓ1 norm over ``k`` steps and of the last step's alone
    (:func:`gaussian_shape_test`)."""
    law = gaussian_l1_law(dim)
    return NoiseNorm(law, noise_std * math.sqrt(steps), law, noise_std, steps)


def shape_verdict(
    l1_norm: float, kurtosis: float, dim: int, *, noise_std: float, steps: int,
    clip_bound: float, records: RecordCount, alpha: float, slack: float,
) -> Verdict:
    """:func:`gaussian_shape_test` from its statistics, ``‖u‖₁`` and the excess kurtosis of
    ``u`` (arguments validated by the caller)."""
    x, p, s, c, a = l1_norm, dim, noise_std, clip_bound, alpha
    noise = l1_noise(p, s, steps)
    per_record = math.sqrt(p) * c  # ‖s‖₁ ≤ √p ‖s‖₂
    p_value = shape_p_value(x, noise, per_record, records, slack)
    statistic = {
        "l1_norm": x,
        "expected_l1_norm": noise.scale * p * math.sqrt(2.0 / math.pi),
        "excess_kurtosis": kurtosis,
        "kurtosis_standard_error": math.sqrt(24.0 / p),
    }
    verdict = decide(
        "gaussian-shape",
        p_value,
        a,
        statistic,
        passed=f"‖u‖₁ = {x:.6g} fits Gaussian noise",
        failed=f"‖u‖₁ = {x:.6g} is too small for Gaussian noise of σC = {s:.4g}: heavier tails",
        speaks_to=LAW,
    )
    if verdict.status == "consistent" and not _shape_applicable(p, noise, records, c, a):
        return unverifiable(
            "gaussian-shape",
            "not applicable: a signal of C·B could hide Laplace noise of the declared variance",
            {**statistic, "p_value": p_value}, LAW,
        )
    return verdict


def gaussian_light_tail_test(
    noisy_sum: np.ndarray,
    *,
    noise_std: float,
    steps: int,
    clip_bound: float,
    records: RecordCount,
    alpha: float = DEFAULT_ALPHA,
    slack: float = 0.0,
) -> Verdict:
    """One-sided test that the noise is not lighter-tailed than Gaussian (bounded noise).

    ``T(u) = Σ_i (|u_i|/σC − τ)₊`` (τ = :data:`LIGHT_TAIL_CUT`) is an even convex function of
    ``u``, so ``{T ≤ t}`` is a symmetric convex set and Anderson's theorem, applied to the last
    step's noise as in :mod:`~fedpriv.verification.sandwich`, gives
    ``P(T(u) ≤ t) ≤ P(T(N_k/σC) ≤ t)`` *whatever the signal and the earlier steps*: reject when
    ``T < Q(α)``, ``Q`` the lower quantile of ``Σ_i (|Z_i| − τ)₊`` by Chernoff
    (:func:`~fedpriv.verification.laws.gaussian_excess_law`). Valid for every signal an honest
    client can produce, at every ``k``; ``slack`` (ℓ1) moves ``T`` by at most ``slack/σC``.

    *Applicable* (reported; a passing test is otherwise ``unverifiable``) when noise bounded by
    ``√3·σC`` per coordinate — uniform noise of the declared variance; Rademacher's is bounded
    by ``σC`` — is caught whatever the signal: with ``c = τ − √3`` it leaves
    ``T = Σ_i (|s_i + z_i| − τ)₊ ≤ Σ_i (|s_i| − c)₊ ≤ ‖s‖²/(4c)`` (``(x − c)₊ ≤ x²/(4c)`` for
    ``x ≥ 0``: ``x²/(4c) − x + c = (x − 2c)²/(4c)``; attained by a signal spread evenly over
    ``(‖s‖/2c)²`` coordinates), below ``Q`` while ``(C·B/σC)² < 4c·Q``: ``B < 13.6σ`` at
    p = 13,700. Only at ``k = 1``: over ``k`` steps bounded noise sums to a spread of
    ``σC√k``, past the cut.

    Parameters
    ----------
    noisy_sum, noise_std, steps, clip_bound, records, alpha, slack
        As in :func:`gaussian_shape_test` (``slack`` in ℓ1).
    """
    u = np.asarray(noisy_sum, dtype=np.float64).ravel()
    p, k = check_dim("dim", u.size), check_dim("steps", steps)
    s, c = check_positive("noise_std", noise_std), check_positive("clip_bound", clip_bound)
    a, tol = check_probability("alpha", alpha), check_nonnegative("slack", slack)
    return light_tail_verdict(tail_excess(np.abs(u), s), p, noise_std=s, steps=k, clip_bound=c,
                              records=records, alpha=a, slack=tol)


def tail_excess(magnitudes: np.ndarray, noise_std: float) -> float:
    """``T(u) = Σ_i (|u_i|/σC − τ)₊`` of :func:`gaussian_light_tail_test`, from ``|u|``."""
    return float(tail_excesses(magnitudes, noise_std))


def tail_excesses(magnitudes: np.ndarray, noise_std: float,
                  out: np.ndarray | None = None) -> np.ndarray:
    """:func:`tail_excess` of each row of ``magnitudes`` (the last axis summed; ``out``: where
    ``|u|/σC`` is formed, ``magnitudes`` itself when the caller is done with it)."""
    scaled = np.divide(magnitudes, noise_std, out=out)
    scaled -= LIGHT_TAIL_CUT
    np.maximum(scaled, 0.0, out=scaled)
    return np.add.reduce(scaled, axis=-1)


def light_tail_verdict(
    excess: float, dim: int, *, noise_std: float, steps: int, clip_bound: float,
    records: RecordCount, alpha: float, slack: float,
) -> Verdict:
    """:func:`gaussian_light_tail_test` from its statistic ``T(u)`` (:func:`tail_excess`;
    arguments validated by the caller); its p-value is the law's lower tail at
    ``T + slack/σC``."""
    p, k, s, c, a = dim, steps, noise_std, clip_bound, alpha
    law = gaussian_excess_law(p, LIGHT_TAIL_CUT)
    p_value = law.cdf(excess + slack / s)
    statistic = {"tail_excess": excess, "expected_tail_excess": p * law.mean,
                 "cut": LIGHT_TAIL_CUT}
    verdict = decide(
        "gaussian-light-tail", p_value, a, statistic,
        passed=f"Σ(|u_i|/σC − {LIGHT_TAIL_CUT:g})₊ = {excess:.4g} fits Gaussian noise",
        failed=f"Σ(|u_i|/σC − {LIGHT_TAIL_CUT:g})₊ = {excess:.4g} is too small for Gaussian "
               f"noise of σC = {s:.4g}: lighter tails (bounded noise)",
        speaks_to=LAW,
    )
    if verdict.status != "consistent":
        return verdict
    if k > 1:
        return unverifiable("gaussian-light-tail", f"not applicable for k = {k} > 1 steps: "
                            "bounded noise summed over steps spreads past the cut",
                            {**statistic, "p_value": p_value}, LAW)
    quantile = lower_quantile(law, a, p * law.mean)
    signal = c * records.upper_quantile(a / 2) / s
    if signal * signal >= 4.0 * (LIGHT_TAIL_CUT - _BOUNDED) * quantile:
        return unverifiable("gaussian-light-tail", "not applicable: a signal of C·B could "
                            "hide bounded noise of the declared variance",
                            {**statistic, "p_value": p_value}, LAW)
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


def verify_gaussian(
    update: ClientUpdate,
    *,
    noise_multiplier: float,
    clip_bound: float,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """The ``gaussian`` mechanism's checks on a recovered update: the norm test and both sides
    of the noise law (shape: heavier tails; light tail: bounded noise), combined; ``σ = 0``
    (no formal guarantee) is checked like ``clip``.

    The clipping bound is widened by the float32 tolerance
    :func:`~fedpriv.verification.roundoff.norm_tolerance` and each norm by the rounding slack
    of the parameter round trip (one step's noise norm taken at its ``1 − 10⁻¹⁵`` quantile).
    """
    sigma = check_nonnegative("noise_multiplier", noise_multiplier)
    c = check_positive("clip_bound", clip_bound)
    if sigma == 0:
        return verify_clip(update, clip_bound=c, alpha=alpha)
    check = GaussianCheck.of(update, sigma, c, alpha)
    slack2, slack1 = check.slacks(update)
    u = update.noisy_sum
    with np.errstate(over="ignore"):  # a hostile update's norm past float64 is inf: refuted
        observed_norm = float(np.linalg.norm(u))
    norm = gaussian_norm_test(observed_norm, dim=check.dim, noise_std=check.noise_std,
                              slack=slack2, **check.common)
    shape = gaussian_shape_test(u, noise_std=check.noise_std, slack=slack1, **check.common)
    light = gaussian_light_tail_test(u, noise_std=check.noise_std, slack=slack1, **check.common)
    return check.combined(norm, shape, light)


@dataclass(frozen=True)
class GaussianCheck:
    """What :func:`verify_gaussian` derives from the declaration alone — the widened clipping
    bound, the noise std, the bound on one step's release for the rounding slacks and the
    power figures — which the replies sharing a declaration compute once
    (:mod:`~fedpriv.verification.gaussian_batch`)."""

    dim: int
    noise_multiplier: float
    noise_std: float
    step_bound: float  # ‖r_t‖₂ before cancellation, (‖S_t‖ + ‖N_t‖)/L, for the slacks
    common: dict[str, Any]  # steps, clip_bound (widened), records, alpha
    figures: dict[str, float]  # the norm test's power figures

    @classmethod
    def of(cls, update: ClientUpdate, sigma: float, clip: float, alpha: float) -> GaussianCheck:
        """The check of ``update``'s declaration at ``σ > 0``, clipping bound ``C``, ``alpha``:
        the clipping bound widened by the float32 tolerance
        :func:`~fedpriv.verification.roundoff.norm_tolerance` and one step's noise norm taken
        at its ``1 − 10⁻¹⁵`` quantile for the rounding slack of the parameter round trip."""
        p, k, records = update.dim, update.steps, update.records
        most = records.upper_quantile(ROUNDOFF_RISK)
        c_float = clip * (1.0 + norm_tolerance(p, most, update.unit_roundoff))
        noise_std = sigma * clip
        step_noise = noise_std * chi_roundoff_quantile(p)
        step2 = (step_noise + c_float * most) / update.batch_size
        bound = records.upper_quantile(alpha / 2)  # B, conservatively, for the power figures
        figures = {
            "detectable_fraction": gaussian_detectable_fraction(sigma, dim=p, records=bound,
                                                                steps=k, alpha=alpha),
            "signal_power": gaussian_signal_power(sigma, dim=p, records=bound, steps=k,
                                                  alpha=alpha, factor=SIGNAL_FACTOR),
        }
        common = {"steps": k, "clip_bound": c_float, "records": records, "alpha": alpha}
        return cls(p, sigma, noise_std, step2, common, figures)

    def slacks(self, update: ClientUpdate) -> tuple[float, float]:
        """The rounding slacks of ``‖u‖₂`` and ``‖u‖₁`` (:meth:`ClientUpdate.summed_error`)."""
        step2, scale = self.step_bound, update.batch_size
        return (scale * update.summed_error(2, step2),
                scale * update.summed_error(1, math.sqrt(self.dim) * step2))

    def combined(self, norm: Verdict, shape: Verdict, light: Verdict) -> Verdict:
        """The three tests' verdict, the power figures added to the norm test's statistic."""
        norm = dataclasses.replace(norm, statistic={**norm.statistic, **self.figures})
        return combine_verdicts([norm, shape, light], test="gaussian")
