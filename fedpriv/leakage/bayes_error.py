"""Bayes error of a trade-off function and the Δ-divergence between mechanisms (privacy-math.md §4).

For a trade-off function ``f`` and prior ``π`` on the first hypothesis, the least Bayes error is
``R_min(π) = min_a [π a + (1−π) f(a)]``. ``Δ(M‖M̃) = max_π (R_min(π) − R̃_min(π))`` is the
worst-case excess vulnerability of choosing ``M̃`` over ``M``; ``Δ↔ = max(Δ(M‖M̃), Δ(M̃‖M))``
is a metric. Extremes: perfect privacy (PP, ``f(a) = 1 − a``) and blatant non-privacy (BNP,
``f ≡ 0``), with ``Δ(PP‖M) = TV/2 = δ(0)/2`` and ``Δ(M‖BNP) = R* = max_π R_min(π)``.

A curve is held as ``f`` on a fixed grid of type-I errors, dense near 0 and 1 in logit scale
(:func:`alpha_grid`). ``R_min`` is then the exact minimum over the grid's vertices, found by
binary search on the segment slopes (``f`` is convex, so the optimal vertex moves monotonically
with ``π``): vectorised, no optimiser loops. Maximisation over priors uses a uniform grid of
``_PRIOR_POINTS`` refined around its best point, so kinks of ``R_min`` are located to ~1e-7.

References
----------
.. [1] G. Kaissis, S. Kolek, B. Balle, J. Hayes, D. Rueckert, "Beyond the calibration point:
   mechanism comparison in differential privacy", ICML 2025, §3 (Bayes error, Δ-divergence,
   its metric symmetrisation and the PP/BNP extremes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special

from fedpriv.errors import InputError
from fedpriv.leakage.tradeoff import blatant_non_privacy_tradeoff, perfect_privacy_tradeoff

__all__ = [
    "TradeoffCurve",
    "alpha_grid",
    "bayes_error",
    "blatant_non_privacy",
    "delta_divergence",
    "perfect_privacy",
    "symmetric_delta",
]

_PRIOR_POINTS = 4001
_REFINE_POINTS = 2001


def alpha_grid(points: int = 100_001, logit_max: float = 40.0) -> np.ndarray:
    """Type-I errors 0, ``expit(z)`` for ``z`` uniform in ``[−logit_max, logit_max]``, and 1."""
    inner = special.expit(np.linspace(-logit_max, logit_max, points))
    return np.unique(np.concatenate([[0.0], inner, [1.0]]))


def bayes_error(alpha: npt.ArrayLike, beta: npt.ArrayLike, priors: npt.ArrayLike) -> np.ndarray:
    """``R_min(π) = min_a [π a + (1−π) f(a)]`` over the vertices ``(alpha, beta)`` of convex ``f``.

    Moving from vertex ``i`` to ``i+1`` lowers the objective iff the segment slope is below
    ``−π/(1−π)``; the slopes increase, so the optimum is a binary search away (neighbours are
    checked too, against rounding).

    Parameters
    ----------
    alpha
        Increasing type-I errors.
    beta
        ``f(alpha)``.
    priors
        Priors ``π ∈ [0, 1]`` (any shape).
    """
    a, b = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    pi = np.asarray(priors, dtype=float)
    if np.any(~(pi >= 0.0) | ~(pi <= 1.0)):
        raise InputError("priors", priors, "priors in [0, 1]")
    slopes = np.diff(b) / np.diff(a)
    with np.errstate(divide="ignore"):
        threshold = -pi / (1.0 - pi)
    best = np.searchsorted(slopes, threshold, side="left")
    risk = np.full(pi.shape, np.inf)
    for shift in (-1, 0, 1):
        k = np.clip(best + shift, 0, a.size - 1)
        risk = np.minimum(risk, pi * a[k] + (1.0 - pi) * b[k])
    return risk


def _maximise(objective: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float]:
    """``(max, argmax)`` of ``objective(π)`` over [0, 1]: uniform grid, then a refined one."""
    coarse = np.linspace(0.0, 1.0, _PRIOR_POINTS)
    k = int(np.argmax(objective(coarse)))
    fine = np.linspace(coarse[max(k - 1, 0)], coarse[min(k + 1, coarse.size - 1)], _REFINE_POINTS)
    values = objective(fine)
    j = int(np.argmax(values))
    return float(values[j]), float(fine[j])


@dataclass(frozen=True)
class TradeoffCurve:
    """A trade-off function sampled on a grid of type-I errors (``alpha`` increasing)."""

    alpha: np.ndarray
    beta: np.ndarray

    @classmethod
    def from_function(
        cls, tradeoff: Callable[[np.ndarray], np.ndarray], alpha: np.ndarray | None = None
    ) -> TradeoffCurve:
        """Sample ``tradeoff`` on ``alpha`` (default :func:`alpha_grid`)."""
        grid = alpha_grid() if alpha is None else np.asarray(alpha, dtype=float)
        return cls(alpha=grid, beta=np.asarray(tradeoff(grid), dtype=float))

    def bayes_error(self, priors: npt.ArrayLike) -> np.ndarray:
        """``R_min(π)`` at each prior."""
        return bayes_error(self.alpha, self.beta, priors)

    def total_variation(self) -> float:
        """``TV(P, Q) = δ(0) = max_a (1 − a − f(a))``."""
        return float(np.max(1.0 - self.alpha - self.beta))

    def max_bayes_error(self) -> tuple[float, float]:
        """``(R*, π*)``: the largest Bayes error over priors and where it is reached."""
        return _maximise(self.bayes_error)


def perfect_privacy() -> TradeoffCurve:
    """The PP curve ``f(a) = 1 − a`` on the default grid."""
    return TradeoffCurve.from_function(perfect_privacy_tradeoff)


def blatant_non_privacy() -> TradeoffCurve:
    """The BNP curve ``f ≡ 0`` on the default grid."""
    return TradeoffCurve.from_function(blatant_non_privacy_tradeoff)


def delta_divergence(curve: TradeoffCurve, other: TradeoffCurve) -> tuple[float, float]:
    """``(Δ(M‖M̃), π*)`` with ``Δ(M‖M̃) = max_π (R_min(π) − R̃_min(π))`` ([1]_ §3).

    ``curve`` is ``M``, ``other`` is ``M̃``; the value is ≥ 0 because both Bayes errors vanish at
    ``π ∈ {0, 1}``.
    """
    return _maximise(lambda pi: curve.bayes_error(pi) - other.bayes_error(pi))


def symmetric_delta(curve: TradeoffCurve, other: TradeoffCurve) -> float:
    """``Δ↔(M, M̃) = max(Δ(M‖M̃), Δ(M̃‖M))``, a metric on trade-off functions ([1]_ §3)."""
    return max(delta_divergence(curve, other)[0], delta_divergence(other, curve)[0])
