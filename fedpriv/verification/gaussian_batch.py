"""``gaussian`` for many replies at once: :func:`~fedpriv.verification.gaussian.verify_gaussian`
of each update recovered under one declaration (privacy-math.md §9.2; issue 37).

Everything that depends on the declaration alone — the widened clipping bound, the slack's
step bound, the power figures, the laws — is computed once
(:class:`~fedpriv.verification.gaussian.GaussianCheck`); each update's statistics (``‖u‖₂``,
``‖u‖₁``, the excess kurtosis, the tail excess) are the per-reply expressions, ``|u|`` taken once
for the two that read it; the norm test's p-values, whose bisection over the record bound
evaluates a χ law a dozen times per reply, are taken for every reply at once
(:func:`~fedpriv.verification.sandwich.one_sided_p_values`, :meth:`~.laws.ChiNorm.cdfs`). Every
verdict is the one :func:`verify_gaussian` returns, bit for bit; an update this path does not
cover (another declaration, a norm or slack past float64) is verified alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fedpriv.validate import check_nonnegative, check_positive, check_probability
from fedpriv.verification.gaussian import (
    GaussianCheck,
    gaussian_norm_test,
    l2_noise,
    light_tail_verdict,
    shape_verdict,
    tail_excess,
    verify_gaussian,
)
from fedpriv.verification.laws import ChiNorm, excess_kurtosis
from fedpriv.verification.records import RecordCount
from fedpriv.verification.sandwich import NoiseNorm, SandwichResult, one_sided_p_values
from fedpriv.verification.update import ClientUpdate
from fedpriv.verification.verdict import Verdict

__all__ = ["verify_gaussian_batch"]


def verify_gaussian_batch(
    updates: Sequence[ClientUpdate], *, noise_multiplier: float, clip_bound: float,
    alpha: float,
) -> list[Verdict]:
    """:func:`~fedpriv.verification.gaussian.verify_gaussian` of each update, in order; the
    updates that share the first one's declaration (dimension, steps, records, divisor,
    optimiser scale, θ's norms) are verified together (module docstring)."""
    sigma = check_nonnegative("noise_multiplier", noise_multiplier)
    c = check_positive("clip_bound", clip_bound)
    a = check_probability("alpha", alpha)

    def alone(update: ClientUpdate) -> Verdict:
        return verify_gaussian(update, noise_multiplier=sigma, clip_bound=c, alpha=alpha)

    if sigma == 0 or not updates:
        return [alone(u) for u in updates]
    check = GaussianCheck.of(updates[0], sigma, c, alpha)
    key = _declared(updates[0])
    rows = [_statistics(u, check) if _declared(u) == key else None for u in updates]
    together = [i for i, row in enumerate(rows) if row is not None]
    verdicts = [alone(u) if row is None else None for u, row in zip(updates, rows, strict=True)]
    if not together:
        return verdicts  # type: ignore[return-value]
    stats = np.array([rows[i] for i in together])  # norm, l1, kurtosis, excess, slack2, slack1
    s, common = check.noise_std, {**check.common, "alpha": a}
    norms = _sandwiches(stats[:, 0], stats[:, 4], l2_noise(check.dim, s, check.common["steps"]),
                        check.common["clip_bound"], check.common["records"])
    for i, (norm, l1, kurtosis, excess, slack2, slack1), both in zip(
            together, stats.tolist(), norms, strict=True):
        verdicts[i] = check.combined(
            gaussian_norm_test(norm, dim=check.dim, noise_std=s, slack=slack2, result=both,
                               **common),
            shape_verdict(l1, kurtosis, check.dim, noise_std=s, slack=slack1, **common),
            light_tail_verdict(excess, check.dim, noise_std=s, slack=slack1, **common),
        )
    return verdicts  # type: ignore[return-value]


def _declared(update: ClientUpdate) -> tuple:
    """What :class:`GaussianCheck` and the slacks read of an update besides its own Δ."""
    return (update.dim, update.steps, update.records, update.batch_size, update.step_scale,
            update.weight_decay, update.start_norms, update.unit_roundoff)


def _statistics(update: ClientUpdate, check: GaussianCheck) -> tuple[float, ...] | None:
    """``(‖u‖₂, ‖u‖₁, excess kurtosis, T(u), slack₂, slack₁)`` as :func:`verify_gaussian`
    computes them, or None where one is not finite (a hostile update: verified alone)."""
    u = update.noisy_sum
    with np.errstate(over="ignore", invalid="ignore"):
        norm = float(np.linalg.norm(u))
        magnitudes = np.abs(u)
        row = (norm, float(np.sum(magnitudes)), excess_kurtosis(u),
               tail_excess(magnitudes, check.noise_std), *check.slacks(update))
    return row if all(math.isfinite(x) for x in row[:2] + row[3:]) else None


def _sandwiches(norms: np.ndarray, slacks: np.ndarray, noise: NoiseNorm, clip: float,
                records: RecordCount) -> list[SandwichResult]:
    """:func:`~fedpriv.verification.sandwich.sandwich` of each ``‖u‖₂`` against the χ laws
    of :func:`~fedpriv.verification.gaussian.l2_noise` (``per_record = C``), all at once."""
    law = noise.law
    assert isinstance(law, ChiNorm)
    count, k = len(norms), noise.steps
    low, high = norms + slacks, norms - slacks

    def low_tails(b: np.ndarray) -> np.ndarray:  # sandwich.low_tail, elementwise
        return np.minimum(law.cdfs(low / noise.step_scale),
                          law.cdfs((low + clip * b) / noise.scale))

    def high_tails(b: np.ndarray) -> np.ndarray:  # sandwich.high_tail, elementwise
        signal = clip * b
        triangle = law.sfs((high - signal) / noise.scale)
        if k != 1:
            return triangle
        return np.minimum(triangle, law.sfs_shifted(high / noise.scale, signal / noise.scale))

    p_low, _ = one_sided_p_values(low_tails, records, count, k > 1)
    p_high, b_high = one_sided_p_values(high_tails, records, count)
    p = np.minimum(1.0, 2.0 * np.minimum(p_low, p_high))
    return [SandwichResult(*values) for values in zip(
        p.tolist(), p_low.tolist(), p_high.tolist(), (clip * b_high).tolist(), strict=True)]
