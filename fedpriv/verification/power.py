"""Power of the Gaussian norm test against under-noising (privacy-math.md §9.7).

The alternative: the client declared ``σ_d`` but added ``σ_a < σ_d``, over ``k`` steps, with
``B`` records (a known count). Units of ``C`` (every quantity scales with it). Two models of the
clipped signal, all ``B`` gradients aligned (``‖Σ S‖ = B``):

* ``"independent"`` — the signal does not depend on the noise (exact for ``k = 1``, where the
  gradients are computed before the noise is drawn): ``‖u‖²/(σ_a²k)`` is noncentral
  ``χ²_p`` with non-centrality ``B²/(σ_a²k)``;
* ``"adversarial"`` — the signal may point anywhere, even along the noise (the triangle
  inequality's worst case): ``‖u‖`` anywhere in ``[‖N‖ − B, ‖N‖ + B]``; the power is then the
  probability that every such value is rejected, a lower bound for every signal.

``last_step = False`` describes the plain sandwich of the spec, whose low threshold is
``σ√k·a − B`` without the last-step (Anderson) bound ``σ·a`` of
:func:`~fedpriv.verification.gaussian.gaussian_norm_test`; with the adversarial model it
reproduces the spec's "detects σ = 2 against 0.5 while B ≲ 88" (≈ 84 at α = 10⁻⁶).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from scipy import stats

from fedpriv.errors import InputError
from fedpriv.validate import check_dim, check_nonnegative, check_positive, check_probability
from fedpriv.verification.laws import ncx2_sf
from fedpriv.verification.verdict import DEFAULT_ALPHA

__all__ = ["DETECTION_POWER", "SIGNAL_FACTOR", "gaussian_detectable_fraction",
           "gaussian_detectable_records", "gaussian_norm_power", "gaussian_norm_thresholds",
           "gaussian_signal_power", "laplace_detectable_fraction", "laplace_signal_power"]

SignalModel = Literal["independent", "adversarial"]

DETECTION_POWER = 0.99
"""The probability at which the power figures are stated ("caught with probability 0.99")."""
SIGNAL_FACTOR = 10.0
"""The signal-bound power is stated against a clipped sum this many times its bound."""


def gaussian_norm_thresholds(
    declared_sigma: float,
    *,
    dim: int,
    records: int,
    steps: int = 1,
    alpha: float = DEFAULT_ALPHA,
    last_step: bool = True,
) -> tuple[float, float]:
    """``(T_low, T_high)`` of :func:`~fedpriv.verification.gaussian.gaussian_norm_test` for a
    known ``B``, in units of ``C``: ``T_low = max(σ·q, σ√k·q − B)`` (``σ√k·q − B`` without
    ``last_step``), ``T_high = σ√k·q' + B``, ``q``, ``q'`` the ``α/2`` and ``1 − α/2`` quantiles
    of ``χ_p``; at ``k = 1`` (with ``last_step``) the quadrature threshold
    ``T_high = σ·sqrt(ncχ²_p((B/σ)²)⁻¹(1 − α/2))`` where it is smaller."""
    sigma = check_positive("declared_sigma", declared_sigma)
    p, b, k = check_dim("dim", dim), check_dim("records", records, 0), check_dim("steps", steps)
    a = check_probability("alpha", alpha)
    low = math.sqrt(float(stats.chi2.ppf(a / 2, p)))
    high = math.sqrt(float(stats.chi2.isf(a / 2, p)))
    triangle = sigma * math.sqrt(k) * low - b
    top = sigma * math.sqrt(k) * high + b
    if last_step and k == 1 and b > 0:
        top = min(top, sigma * math.sqrt(float(stats.ncx2.isf(a / 2, p, (b / sigma) ** 2))))
    return max(sigma * low, triangle) if last_step else triangle, top


def gaussian_norm_power(
    declared_sigma: float,
    actual_sigma: float,
    *,
    dim: int,
    records: int,
    steps: int = 1,
    alpha: float = DEFAULT_ALPHA,
    signal: SignalModel = "independent",
    last_step: bool = True,
) -> float:
    """Probability that the Gaussian norm test rejects a client that declared ``σ_d`` and
    added ``σ_a``, with ``B = records`` aligned clipped gradients.

    Parameters
    ----------
    declared_sigma, actual_sigma
        ``σ_d > 0`` and ``σ_a ≥ 0`` (noise multipliers).
    dim, records, steps
        ``p``, ``B`` and ``k``.
    alpha
        The test's false-alarm rate.
    signal
        ``"independent"`` or ``"adversarial"`` (see the module docstring).
    last_step
        Whether the test uses the last-step bound (as ``gaussian_norm_test`` does).
    """
    actual = check_nonnegative("actual_sigma", actual_sigma)
    low, high = gaussian_norm_thresholds(
        declared_sigma, dim=dim, records=records, steps=steps, alpha=alpha, last_step=last_step
    )
    if signal not in ("independent", "adversarial"):
        raise InputError("signal", signal, "'independent' or 'adversarial'")
    return _power(low, high, actual, float(records), int(dim), int(steps), signal)


def _power(low: float, high: float, actual: float, b: float, p: int, steps: int,
           signal: SignalModel) -> float:
    """:func:`gaussian_norm_power` at given thresholds (units of ``C``)."""
    if actual == 0:  # ‖u‖ = B exactly, or anything in [0, B] for the adversary
        return float(b < low) if signal == "adversarial" else float(b < low or b > high)
    scale = actual * math.sqrt(steps)
    if signal == "adversarial":
        below = stats.chi2.cdf(((low - b) / scale) ** 2, p) if low > b else 0.0
        return float(below + stats.chi2.sf(((high + b) / scale) ** 2, p))
    shift = (b / scale) ** 2
    below = stats.ncx2.cdf((low / scale) ** 2, p, shift) if shift > 0 else stats.chi2.cdf(
        (low / scale) ** 2, p
    )
    above = stats.ncx2.sf((high / scale) ** 2, p, shift) if shift > 0 else stats.chi2.sf(
        (high / scale) ** 2, p
    )
    return float(below + above)


def gaussian_detectable_records(
    declared_sigma: float,
    actual_sigma: float,
    *,
    dim: int,
    steps: int = 1,
    alpha: float = DEFAULT_ALPHA,
    power: float = 0.99,
    signal: SignalModel = "independent",
    last_step: bool = True,
) -> int:
    """The largest ``B`` at which :func:`gaussian_norm_power` is at least ``power`` (the power
    falls as ``B`` grows when ``σ_a < σ_d``); ``−1`` if not even ``B = 0``."""
    if not check_nonnegative("actual_sigma", actual_sigma) < check_positive(
        "declared_sigma", declared_sigma
    ):
        raise InputError("actual_sigma", actual_sigma, f"less than declared_sigma {declared_sigma}")
    target = check_probability("power", power)

    def detects(b: int) -> bool:
        return (
            gaussian_norm_power(
                declared_sigma, actual_sigma, dim=dim, records=b, steps=steps, alpha=alpha,
                signal=signal, last_step=last_step,
            )
            >= target
        )  # fmt: skip

    if not detects(0):
        return -1
    low, high = 0, 1
    while detects(high):
        low, high = high, 2 * high
    while high - low > 1:  # detects(low), not detects(high)
        mid = (low + high) // 2
        low, high = (mid, high) if detects(mid) else (low, mid)
    return low


def gaussian_detectable_fraction(
    declared_sigma: float,
    *,
    dim: int,
    records: int,
    steps: int = 1,
    alpha: float = DEFAULT_ALPHA,
    power: float = DETECTION_POWER,
) -> float:
    """The largest ``f`` such that noise ``f·σ_d`` (all ``k`` steps under-noised by ``f``) is
    caught with probability ≥ ``power`` — "would catch noise below f × declared" — or 0.

    The signal model is ``"independent"`` at ``k = 1`` (exact: the gradients are computed
    before the noise is drawn) and ``"adversarial"`` at ``k > 1`` (a lower bound for every
    signal, as the test's own validity assumes). At ``k > 1`` with many records the low side
    is the last step's bound ``σ·a``, so ``f`` falls like ``1/√k``: the multi-step test sees
    only total noise below one step's (privacy-math.md §9.7).
    """
    return _detectable_fraction(float(declared_sigma), int(dim), int(records), int(steps),
                                float(alpha), float(power))


@lru_cache(maxsize=1024)
def _detectable_fraction(sigma: float, dim: int, records: int, steps: int, alpha: float,
                         power: float) -> float:
    model: SignalModel = "independent" if steps == 1 else "adversarial"
    bottom, top = gaussian_norm_thresholds(sigma, dim=dim, records=records, steps=steps,
                                           alpha=alpha)  # once: they do not depend on f

    def caught(f: float) -> bool:
        return _power(bottom, top, f * sigma, float(records), dim, steps, model) >= power

    if not caught(0.0):
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(20):  # caught(low), not caught(high); f to 10⁻⁶
        mid = 0.5 * (low + high)
        low, high = (mid, high) if caught(mid) else (low, mid)
    return low


@lru_cache(maxsize=1024)
def gaussian_signal_power(
    declared_sigma: float,
    *,
    dim: int,
    records: int,
    steps: int = 1,
    alpha: float = DEFAULT_ALPHA,
    factor: float = SIGNAL_FACTOR,
) -> float:
    """Probability that the high side rejects a clipped sum ``factor`` times its bound
    (``‖Σ S‖ = factor·B``, units of ``C``) with the declared noise: exact at ``k = 1``
    (``‖u‖²/σ²`` noncentral ``χ²_p((factor·B/σ)²)``), a lower bound at ``k > 1`` (the signal
    against the noise: ``‖u‖ ≥ factor·B − ‖N‖``). Kept per argument tuple: it depends on the
    declaration alone, which a round's clients share (``ncx2.isf`` costs about a millisecond)."""
    sigma, p, k = float(declared_sigma), int(dim), int(steps)
    _, high = gaussian_norm_thresholds(sigma, dim=p, records=records, steps=k, alpha=alpha)
    signal = factor * records
    if k == 1:
        return ncx2_sf((high / sigma) ** 2, p, (signal / sigma) ** 2)
    if signal <= high:
        return 0.0
    return float(stats.chi2.cdf(((signal - high) / (sigma * math.sqrt(k))) ** 2, p))


def laplace_detectable_fraction(
    *, dim: int, scale_records: float, steps: int = 1, alpha: float = DEFAULT_ALPHA,
    power: float = DETECTION_POWER,
) -> float:
    """:func:`gaussian_detectable_fraction` for the Laplace ℓ1 norm test at ``k = 1``
    (adversarial signal, closed form): ``f·b·‖V‖₁ + C·B ≤ b·G(α/2)`` with probability
    ``power`` when ``f ≤ (G(α/2) − C·B/b)/G(power)``, ``G`` the ``Gamma(p, 1)`` quantiles;
    ``scale_records = C·B/b``. 0 at ``k > 1`` (not derived)."""
    if steps != 1:
        return 0.0
    low = float(stats.gamma.ppf(alpha / 2, dim))
    return max(0.0, (low - scale_records) / float(stats.gamma.ppf(power, dim)))


def laplace_signal_power(
    *, dim: int, scale_records: float, steps: int = 1, alpha: float = DEFAULT_ALPHA,
    factor: float = SIGNAL_FACTOR,
) -> float:
    """Lower bound on the probability that the Laplace ℓ1 test's high side rejects a clipped
    sum of ℓ1 norm ``factor·C·B`` (``scale_records = C·B/b``) with the declared noise, at
    ``k = 1``: ``‖u‖₁ ≥ factor·C·B − b‖V‖₁`` exceeds ``b·G(1 − α/2) + C·B`` with probability
    ``P(‖V‖₁ ≤ (factor − 1)·C·B/b − G(1 − α/2))``. 0 at ``k > 1`` (not derived)."""
    if steps != 1:
        return 0.0
    room = (factor - 1.0) * scale_records - float(stats.gamma.isf(alpha / 2, dim))
    return float(stats.gamma.cdf(room, dim)) if room > 0 else 0.0
