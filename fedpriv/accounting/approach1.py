"""The second accounting route ("approach 1" of Biswas et al.): privacy-math.md §3.

1. One unsubsampled release, from its RDP curve:
   ``δ(ε₀) = inf_α exp((α−1)(τ_α − ε₀)) / (α−1) · (1 − 1/α)^α`` (the conversion of
   ``conversion.py`` solved for δ).
2. Amplification by Poisson sampling at rate ``q`` (Balle, Barthe & Gaboardi 2018):
   ``ε_s = log(1 + q(e^{ε₀} − 1))``, ``δ_s = q δ(ε₀)``.
3. ``T``-fold adaptive composition (Kairouz, Oh & Viswanath 2017, Thm. 3.4):
   ``ε̃ = min{Tε_s, Tε_s·tanh(ε_s/2) + ε_s√(2T log(e + √(Tε_s²)/δ̃)),
   Tε_s·tanh(ε_s/2) + ε_s√(2T log(1/δ̃))}`` with total ``δ = 1 − (1−δ_s)^T(1−δ̃)``
   (``tanh(ε/2) = (e^ε−1)/(e^ε+1)``).

For every ``ε₀`` the whole remaining budget goes to ``δ̃`` (``ε̃`` decreases in ``δ̃``), so the
search is one-dimensional: a log-spaced grid of ``ε₀``, then a finer grid around the best
point. Every candidate is a valid guarantee; the total δ of the one returned is recomputed and
never exceeds the target. Hand-written because no library implements this route.

References
----------
.. [1] Biswas et al., arXiv:2502.04045 ("approach 1").
.. [2] B. Balle, G. Barthe, M. Gaboardi, "Privacy amplification by subsampling: tight analyses
   via couplings and divergences", NeurIPS 2018.
.. [3] P. Kairouz, S. Oh, P. Viswanath, "The composition theorem for differential privacy",
   IEEE Trans. Inf. Theory 63(6), 2017, Thm. 3.4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedpriv.accounting.subsampling import RdpCurve

__all__ = [
    "APPROACH1_ORDERS",
    "Approach1",
    "amplify",
    "approach1",
    "kairouz_epsilon",
    "log_delta_for_epsilon0",
]

APPROACH1_ORDERS: np.ndarray = 1.0 + np.geomspace(1e-3, 1e5, 481)
"""Orders for ``δ(ε₀)``: the unsubsampled curves are closed forms, so the grid can be fine."""

_EPS0_GRID = np.geomspace(1e-6, 1e3, 901)
_REFINE_POINTS = 201
_SAFETY = 1.0 - 1e-9  # shrink δ̃ so that rounding can never push the total δ over the target


@dataclass(frozen=True)
class Approach1:
    """The guarantee found by :func:`approach1`: ``(epsilon, delta)`` with ``delta ≤`` target.

    ``order`` attains ``δ(ε₀)``; ``at_edge`` flags an order or ``ε₀`` at the end of its grid.
    """

    epsilon: float
    delta: float
    order: float | None
    epsilon0: float
    delta0: float
    delta_tilde: float
    at_edge: bool


def log_delta_for_epsilon0(
    eps0: npt.ArrayLike, orders: np.ndarray, rdp: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``log δ(ε₀)`` of one release (step 1) and the index of the minimising order, per ``ε₀``."""
    e = np.asarray(eps0, dtype=float)[:, None]
    a = orders[None, :]
    with np.errstate(invalid="ignore"):
        log_d = (a - 1.0) * (rdp[None, :] - e) - np.log(a - 1.0) + a * np.log1p(-1.0 / a)
    log_d = np.where(np.isnan(log_d), np.inf, log_d)
    idx = np.argmin(log_d, axis=1)
    return np.minimum(log_d[np.arange(e.shape[0]), idx], 0.0), idx


def amplify(
    eps0: npt.ArrayLike, log_delta0: npt.ArrayLike, sample_rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Poisson amplification [2]: ``(ε_s, log δ_s)`` from ``(ε₀, log δ₀)`` at rate ``q``."""
    q = float(sample_rate)
    with np.errstate(divide="ignore"):
        eps_s = np.logaddexp(np.log1p(-q), math.log(q) + np.asarray(eps0, dtype=float))
    return eps_s, math.log(q) + np.asarray(log_delta0, dtype=float)


def kairouz_epsilon(eps: npt.ArrayLike, steps: int, delta_tilde: npt.ArrayLike) -> np.ndarray:
    """``ε̃`` of ``steps``-fold composition of ``(ε, δ)``-DP mechanisms ([3] Thm. 3.4)."""
    e = np.asarray(eps, dtype=float)
    d = np.asarray(delta_tilde, dtype=float)
    t = float(steps)
    drift = t * e * np.tanh(e / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        second = drift + e * np.sqrt(2.0 * t * np.log(math.e + np.sqrt(t) * e / d))
        third = drift + e * np.sqrt(2.0 * t * np.log(1.0 / d))
    out = np.minimum(t * e, np.minimum(second, third))
    return np.where(d > 0, out, np.inf)


_STEP1: dict[tuple[bytes, bytes, int], tuple[np.ndarray, np.ndarray]] = {}
_STEP1_KEPT = 256


def _step1(eps0: np.ndarray, orders: np.ndarray, rdp: np.ndarray, which: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`log_delta_for_epsilon0`, kept per RDP curve and ε₀ grid (``which``: −1 for the
    coarse grid, else the coarse index the fine grid surrounds): step 1 knows nothing of
    ``q``, ``T`` or δ, so a release's curve gives the same ``δ(ε₀)`` in every round and for
    every client that declares it (a 901 × 481 evaluation, most of a ledger's accounting)."""
    key = (orders.tobytes(), rdp.tobytes(), which)
    if key not in _STEP1:
        if len(_STEP1) >= _STEP1_KEPT:
            del _STEP1[next(iter(_STEP1))]  # the oldest
        log_d0, idx = log_delta_for_epsilon0(eps0, orders, rdp)
        log_d0.flags.writeable = idx.flags.writeable = False
        _STEP1[key] = (log_d0, idx)
    return _STEP1[key]


def _evaluate(
    eps0: np.ndarray, orders: np.ndarray, rdp: np.ndarray, q: float, steps: int, delta: float,
    step1: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, ...]:
    """ε̃, log δ₀, order index, log δ_s and δ̃ for every ε₀ (the whole budget left to δ̃);
    ``step1``: :func:`log_delta_for_epsilon0` of these ε₀, when known."""
    log_d0, idx = log_delta_for_epsilon0(eps0, orders, rdp) if step1 is None else step1
    eps_s, log_ds = amplify(eps0, log_d0, q)
    with np.errstate(divide="ignore", over="ignore"):  # δ_s → 1: no budget left, ε̃ = inf
        log_keep = steps * np.log1p(-np.exp(log_ds))  # log (1 − δ_s)^T
        delta_tilde = -np.expm1(math.log1p(-delta) - log_keep) * _SAFETY
    return kairouz_epsilon(eps_s, steps, delta_tilde), log_d0, idx, log_ds, delta_tilde


def approach1(
    curve: RdpCurve,
    sample_rate: float,
    steps: int,
    delta: float,
    orders: np.ndarray = APPROACH1_ORDERS,
) -> Approach1:
    """Least ``ε`` of approach 1 with total ``δ ≤ delta`` (module docstring).

    Parameters
    ----------
    curve
        RDP curve of one UNSUBSAMPLED release.
    sample_rate, steps, delta
        Poisson rate ``q`` in (0, 1], number of releases ``T ≥ 1``, target δ in (0, 1).
    orders
        Orders over which ``δ(ε₀)`` is minimised.
    """
    rdp = curve(orders)
    eps_tilde = _evaluate(_EPS0_GRID, orders, rdp, sample_rate, steps, delta,
                          _step1(_EPS0_GRID, orders, rdp, -1))[0]
    i = int(np.argmin(eps_tilde))
    if not math.isfinite(eps_tilde[i]):
        return Approach1(math.inf, delta, None, math.nan, math.nan, math.nan, False)
    fine = np.geomspace(_EPS0_GRID[max(i - 1, 0)], _EPS0_GRID[min(i + 1, _EPS0_GRID.size - 1)],
                        _REFINE_POINTS)
    eps_t, log_d0, idx, log_ds, d_tilde = _evaluate(fine, orders, rdp, sample_rate, steps, delta,
                                                    _step1(fine, orders, rdp, i))
    j = int(np.argmin(eps_t))
    total = -math.expm1(steps * math.log1p(-math.exp(log_ds[j])) + math.log1p(-d_tilde[j]))
    edge = i in (0, _EPS0_GRID.size - 1) or int(idx[j]) in (0, orders.size - 1)
    return Approach1(float(eps_t[j]), total, float(orders[idx[j]]), float(fine[j]),
                     math.exp(log_d0[j]), float(d_tilde[j]), edge)
