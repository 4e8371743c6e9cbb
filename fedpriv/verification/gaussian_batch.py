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

from collections.abc import Sequence
from functools import partial
from typing import TypeAlias

import numpy as np

from fedpriv.validate import check_nonnegative, check_positive, check_probability
from fedpriv.verification.gaussian import (
    GaussianCheck,
    gaussian_norm_test,
    l2_noise,
    light_tail_verdict,
    shape_verdict,
    tail_excesses,
    verify_gaussian,
)
from fedpriv.verification.laws import ChiNorm, excess_kurtoses
from fedpriv.verification.records import RecordCount
from fedpriv.verification.sandwich import NoiseNorm, SandwichResult, one_sided_p_values
from fedpriv.verification.update import BLOCK, ClientUpdate, row_norms
from fedpriv.verification.verdict import Checked, attempted

__all__ = ["verify_gaussian_batch"]

Declared: TypeAlias = tuple[int, int, RecordCount, float, float, float, tuple[float, float],
                            float]
"""What an update shares with those verified together (:func:`_declared`)."""


def verify_gaussian_batch(
    updates: Sequence[ClientUpdate], *, noise_multiplier: float, clip_bound: float,
    alpha: float,
) -> list[Checked]:
    """:func:`~fedpriv.verification.gaussian.verify_gaussian` of each update, in order, or
    what it raised for that update alone (a hostile update's: the others keep their
    verdicts); the updates that share the first one's declaration (dimension, steps, records,
    divisor, optimiser scale, θ's norms) are verified together (module docstring)."""
    sigma = check_nonnegative("noise_multiplier", noise_multiplier)
    c = check_positive("clip_bound", clip_bound)
    a = check_probability("alpha", alpha)

    def alone(update: ClientUpdate) -> Checked:
        return attempted(partial(verify_gaussian, update, noise_multiplier=sigma, clip_bound=c,
                                 alpha=alpha))

    if sigma == 0 or not updates:
        return [alone(u) for u in updates]
    check = GaussianCheck.of(updates[0], sigma, c, alpha)
    key = _declared(updates[0])
    shared = [i for i, u in enumerate(updates) if _declared(u) == key]
    stats = _statistics([updates[i] for i in shared], check)
    finite = np.isfinite(stats[:, [0, 1, 3, 4, 5]]).all(axis=1)
    together = [i for i, ok in zip(shared, finite.tolist(), strict=True) if ok]
    verdicts: dict[int, Checked] = {i: alone(updates[i])
                                    for i in sorted(set(range(len(updates))) - set(together))}
    stats = stats[finite]
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
    return [verdicts[i] for i in range(len(updates))]


def _declared(update: ClientUpdate) -> Declared:
    """What :class:`GaussianCheck` and the slacks read of an update besides its own Δ."""
    return (update.dim, update.steps, update.records, update.batch_size, update.step_scale,
            update.weight_decay, update.start_norms, update.unit_roundoff)


def _statistics(updates: Sequence[ClientUpdate], check: GaussianCheck) -> np.ndarray:
    """One row per update: ``(‖u‖₂, ‖u‖₁, excess kurtosis, T(u), slack₂, slack₁)``, each the
    value :func:`verify_gaussian` computes (the same ufuncs, each row's reductions in the same
    order: ``np.linalg.norm`` of a vector is ``√(u·u)``, a row's sum is its pairwise sum),
    taken :data:`BLOCK` rows at a time, in place: a dozen numpy calls per block instead of
    per update."""
    rows = np.empty((len(updates), 6))
    for start in range(0, len(updates), BLOCK):
        part = updates[start:start + BLOCK]
        rows[start:start + len(part)] = _block_statistics(part, check)
    return rows


def _block_statistics(updates: Sequence[ClientUpdate], check: GaussianCheck) -> np.ndarray:
    """:func:`_statistics` of one block."""
    s = check.noise_std
    u = np.stack([update.summed for update in updates])
    with np.errstate(over="ignore", invalid="ignore"):  # a hostile update: verified alone
        u *= updates[0].batch_size  # ClientUpdate.noisy_sum
        norms = row_norms(u)
        magnitudes = np.abs(u)
        l1 = np.add.reduce(magnitudes, axis=1)
        excess = tail_excesses(magnitudes, s, out=magnitudes)
        kurtosis = excess_kurtoses(u)
    slacks = np.array([check.slacks(update) for update in updates])
    return np.column_stack([norms, l1, kurtosis, excess, slacks])


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
