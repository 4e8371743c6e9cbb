"""p-values of norm tests whose signal is bounded by clipping (privacy-math.md §9.1).

The observed norm is ``x = ‖u‖`` with ``u = Σ_t S_t + N``, ``N = Σ_t N_t`` the noise of ``k``
steps and ``‖Σ_t S_t‖ ≤ c·B`` (``c`` the clipping bound per record in this norm, ``B`` the
records used). Three one-sided bounds hold for every signal an honest client can produce:

* **triangle, low:** ``‖N‖ ≥ x − c·B`` fails only if ``‖N‖ ≤ x + c·B``;
* **triangle, high:** ``‖N‖ ≤ x + c·B`` fails only if ``‖N‖ ≥ x − c·B``;
* **quadrature, high (one step, ℓ2, Gaussian):** at ``k = 1`` the clipped signal ``S`` is
  computed before the noise is drawn, so ``N`` is independent of ``S`` and
  ``‖S + N‖² = ‖S‖² + 2⟨S, N⟩ + ‖N‖²`` with ``⟨S, N⟩ ~ N(0, s²‖S‖²)`` given ``S``: exactly,
  ``‖u‖²/s²`` is noncentral ``χ²_p(‖S‖²/s²)`` (``s`` the noise std), stochastically increasing
  in ``‖S‖``, so ``P(‖u‖ ≥ x) ≤ P(ncχ²_p((c·B/s)²) ≥ (x/s)²)`` for every signal of norm
  ``≤ c·B`` — the signal and the noise add in quadrature, not linearly. At ``k > 1`` a step's
  signal may depend on earlier steps' noise (SGD's does), and a signal aligned with the
  noise so far reaches the triangle bound: there the triangle bound is kept.
* **last step, low (Anderson):** the last step's noise ``N_k`` is drawn after everything
  else, so ``u = X + N_k`` with ``X`` independent of ``N_k``; for noise with a symmetric
  unimodal density and a norm ball (symmetric, convex), Anderson's theorem gives
  ``P(‖X + N_k‖ ≤ t | X) ≤ P(‖N_k‖ ≤ t)``: ``x`` is stochastically at least one step's
  noise norm, whatever the signal. No ``B`` enters.

The low side rejects when either low bound does; at a fixed level that is one threshold on
``x`` (the larger of the two), so the level is kept. The two sides are combined by Bonferroni:
``p = min(1, 2·min(p_low, p_high))``.

When ``B`` is random (Poisson sampling), half of a side's level is spent on ``B ≤ B(β)``,
``B(β)`` the least ``b`` with ``P(B > b) ≤ β``: rejecting at level ``a`` when the noise tail
with ``b = B(a/2)`` is at most ``a/2`` gives the p-value
``2 · min_b max(P(B > b), tail(b))`` (``tail`` nondecreasing in ``b``, so the minimum is where the
two cross, found by bisection).

References
----------
.. [1] T. W. Anderson, "The integral of a symmetric unimodal function over a symmetric convex
   set and some probability inequalities", Proc. AMS 6(2), 170–176, 1955, Theorem 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedpriv.verification.laws import NormLaw
from fedpriv.verification.records import RecordCount
from fedpriv.verification.verdict import Verdict, decide

__all__ = ["NoiseNorm", "SandwichResult", "high_tail", "low_tail", "norm_verdict",
           "one_sided_p_value", "one_sided_p_values", "sandwich"]


@dataclass(frozen=True)
class NoiseNorm:
    """A norm of the noise: ``‖N‖ = scale · X`` with ``X ~ law`` for the ``k`` summed steps, and
    ``‖N_k‖ = step_scale · X₁`` with ``X₁ ~ step_law`` for the last step alone."""

    law: NormLaw
    scale: float
    step_law: NormLaw
    step_scale: float
    steps: int
    shifted_sf: Callable[[float, float], float] | None = None
    """``(t, shift) ↦`` bound on ``P(‖Z + v‖ ≥ t)`` over ``‖v‖ ≤ shift`` for the standardised
    noise ``Z`` of one step (the quadrature bound, used at ``k = 1``); None: triangle only."""


def low_tail(observed: float, noise: NoiseNorm, signal: float) -> float:
    """Bound on the probability of a norm this small: ``min`` of the last-step (Anderson) and
    the triangle bounds at signal bound ``signal = c·b``."""
    last = noise.step_law.cdf(observed / noise.step_scale)
    triangle = noise.law.cdf((observed + signal) / noise.scale)
    return min(last, triangle)


def high_tail(observed: float, noise: NoiseNorm, signal: float) -> float:
    """Bound on the probability of a norm this large: the triangle bound at ``c·b``, and at
    ``k = 1`` the quadrature bound where the law offers it (the smaller of two valid bounds on
    the same probability is a valid bound)."""
    triangle = noise.law.sf((observed - signal) / noise.scale)
    if noise.steps != 1 or noise.shifted_sf is None:
        return triangle
    return min(triangle, noise.shifted_sf(observed / noise.scale, signal / noise.scale))


def one_sided_p_value(
    tail: Callable[[int], float], records: RecordCount, uses_records: bool = True
) -> tuple[float, int]:
    """The p-value of one side of a test whose tail bound depends on the record bound ``b``,
    and the ``b`` it was taken at.

    Parameters
    ----------
    tail
        ``b ↦`` bound on the probability of the observation given ``B ≤ b``; nondecreasing.
    records
        The law of ``B``.
    uses_records
        False when ``tail`` does not depend on ``b`` (the last-step bound at ``k = 1``): then no
        level is spent on ``B``.
    """
    if records.known or not uses_records:
        return min(1.0, tail(records.trials)), records.trials
    low, high = 0, records.trials  # predicate P(B > b) ≤ tail(b) is false…false true…true
    while low < high:
        mid = (low + high) // 2
        if records.exceed_probability(mid) <= tail(mid):
            high = mid
        else:
            low = mid + 1
    best, at = tail(low), low
    if low > 0 and records.exceed_probability(low - 1) < best:
        best, at = records.exceed_probability(low - 1), low - 1
    return min(1.0, 2.0 * best), at


def one_sided_p_values(
    tail: Callable[[np.ndarray], np.ndarray], records: RecordCount, count: int,
    uses_records: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`one_sided_p_value` for ``count`` observations at once (replies sharing a
    declaration): ``tail`` maps an array of record bounds, one per observation, to their tail
    bounds, elementwise. The bisections run in lockstep, each ending where it would alone, so
    every p-value and bound is the scalar function's, bit for bit."""
    trials = np.full(count, records.trials)
    if records.known or not uses_records:
        return np.minimum(1.0, tail(trials)), trials
    low, high = np.zeros(count, dtype=trials.dtype), trials
    while (active := low < high).any():
        mid = (low + high) // 2
        up = active & (_exceed(records, mid) <= tail(mid))
        high = np.where(up, mid, high)
        low = np.where(active & ~up, mid + 1, low)
    best, at = tail(low), low
    before = np.where(low > 0, _exceed(records, np.maximum(low - 1, 0)), np.inf)
    earlier = before < best
    return np.minimum(1.0, 2.0 * np.where(earlier, before, best)), np.where(earlier, low - 1, at)


def _exceed(records: RecordCount, bounds: np.ndarray) -> np.ndarray:
    """``P(B > b)`` for each ``b`` (once per distinct value: the scalar is kept, and the
    bisections of replies that share a declaration visit few values)."""
    values, where = np.unique(bounds, return_inverse=True)
    return np.array([records.exceed_probability(int(b)) for b in values])[where]


@dataclass(frozen=True)
class SandwichResult:
    """Both sides of the norm sandwich: the two-sided p-value, each side's, and the signal bound
    the upper side was taken at."""

    p_value: float
    p_low: float
    p_high: float
    signal_bound: float


def sandwich(
    observed: float, noise: NoiseNorm, per_record: float, records: RecordCount, slack: float
) -> SandwichResult:
    """The two-sided norm test of privacy-math.md §9: ``observed`` (widened by ``slack``, the
    float32 round-off) against the noise norm law with a clipped signal of at most
    ``per_record`` per record used; p-value twice the smaller side (Bonferroni over sides)."""
    k = noise.steps
    p_low, _ = one_sided_p_value(
        lambda b: low_tail(observed + slack, noise, per_record * b), records, k > 1
    )
    p_high, b_high = one_sided_p_value(
        lambda b: high_tail(observed - slack, noise, per_record * b), records
    )
    return SandwichResult(min(1.0, 2.0 * min(p_low, p_high)), p_low, p_high, per_record * b_high)


def norm_verdict(
    test: str, observed: float, noise: NoiseNorm, per_record: float, records: RecordCount,
    slack: float, alpha: float, *, norm: str, declared: str, statistic: dict[str, float],
    result: SandwichResult | None = None,
) -> Verdict:
    """The :func:`sandwich` test as a :class:`Verdict`: ``norm`` names the observed norm
    (``"‖u‖₂"``), ``declared`` the declared noise (``"σC = 0.5"``), ``statistic`` the test's own
    figures (the sides' p-values, the signal bound and the slack are added). ``result``: the
    :func:`sandwich` of the same arguments where the caller computed it already (for many
    replies at once: :mod:`~fedpriv.verification.gaussian_batch`)."""
    both = sandwich(observed, noise, per_record, records, slack) if result is None else result
    figures = {"norm": observed, **statistic, "signal_bound": both.signal_bound,
               "p_low": both.p_low, "p_high": both.p_high, "slack": slack}
    where = "small: less noise" if both.p_low <= both.p_high else "large: more noise or signal"
    k = noise.steps
    return decide(
        test, both.p_value, alpha, figures,
        passed=f"{norm} = {observed:.6g} fits noise {declared} over k = {k} steps plus records",
        failed=f"{norm} = {observed:.6g} is too {where} than declared ({declared}, k = {k})",
        speaks_to=("noise-scale", "signal-bound"),
    )
