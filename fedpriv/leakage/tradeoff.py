"""Trade-off functions f(a) of one release and from privacy profiles (privacy-math.md §4).

``f(a)`` is the least type-II error of any test of ``P`` against ``Q`` at type-I error ``a``,
for a tightly dominating pair ``(P, Q)`` of the mechanism. Every function here is vectorised
over ``alpha`` (any shape, values in [0, 1]) and returns an array of the same shape.

References
----------
.. [1] J. Dong, A. Roth, W. Su, "Gaussian differential privacy", JRSS-B 2022, Def. 2.1,
   eq. (2.3) (Gaussian trade-off) and Prop. 2.12 (conversion from a privacy profile).
.. [2] G. Kaissis et al., "Beyond the calibration point: mechanism comparison in differential
   privacy", ICML 2025, §2 (trade-off functions, Bayes error, Δ-divergence).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from fedpriv.errors import InputError
from fedpriv.leakage._validate import as_alpha
from fedpriv.leakage.vmf_curve import vmf_tradeoff

__all__ = [
    "blatant_non_privacy_tradeoff",
    "gaussian_tradeoff",
    "laplace_tradeoff",
    "perfect_privacy_tradeoff",
    "tradeoff_from_privacy_profile",
    "vmf_tradeoff",
]


def _check_mu(mu: float) -> float:
    mu = float(mu)
    if not mu >= 0.0:
        raise InputError("mu", mu, "a number >= 0 (inf for no noise)")
    return mu


def gaussian_tradeoff(alpha: npt.ArrayLike, mu: float) -> np.ndarray:
    """``G_μ(a) = Φ(Φ⁻¹(1−a) − μ)``, the trade-off of ``N(0,1)`` vs ``N(μ,1)`` ([1]_ eq. 2.3).

    ``μ = sensitivity/σ``; ``μ = inf`` (no noise) gives blatant non-privacy ``f ≡ 0``.
    ``Φ⁻¹(1−a)`` is evaluated as ``−Φ⁻¹(a)`` to keep precision for small ``a``.
    """
    a = as_alpha(alpha)
    mu = _check_mu(mu)
    if math.isinf(mu):
        return np.zeros_like(a)
    return special.ndtr(-special.ndtri(a) - mu)


def laplace_tradeoff(alpha: npt.ArrayLike, mu: float) -> np.ndarray:
    """``f(a) = F(F⁻¹(1−a) − μ)``, ``F`` the standard Laplace CDF (privacy-math.md §4).

    The trade-off of ``Lap(0,1)`` vs ``Lap(μ,1)`` with ``μ = sensitivity/b``: the likelihood
    ratio is monotone in the observation, so thresholding it is a Neyman–Pearson test. ``F⁻¹(1−a)``
    is the survival inverse ``isf(a)`` (precise for small ``a``).
    """
    a = as_alpha(alpha)
    mu = _check_mu(mu)
    if math.isinf(mu):
        return np.zeros_like(a)
    return stats.laplace.cdf(stats.laplace.isf(a) - mu)


def perfect_privacy_tradeoff(alpha: npt.ArrayLike) -> np.ndarray:
    """Perfect privacy (PP): ``f(a) = 1 − a``, the trade-off of identical distributions."""
    return 1.0 - as_alpha(alpha)


def blatant_non_privacy_tradeoff(alpha: npt.ArrayLike) -> np.ndarray:
    """Blatant non-privacy (BNP): ``f ≡ 0``, perfectly distinguishable (``none``/``clip``)."""
    return np.zeros_like(as_alpha(alpha))


def _upper_envelope(alpha: np.ndarray, slopes: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """``max_k (heads_k − slopes_k·a)`` for slopes ascending and heads concave in the slope.

    Then every line touches the envelope and line ``k+1`` beats line ``k`` exactly when the
    chord slope ``g_k = Δheads/Δslopes`` exceeds ``a``; ``g`` decreases, so the best line is
    found by binary search (its neighbours are checked too, against rounding).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        chords = np.diff(heads) / np.diff(slopes)
    chords = np.nan_to_num(chords, nan=-np.inf)
    best = np.searchsorted(-chords, -alpha, side="left")
    values = np.full(alpha.shape, -np.inf)
    for shift in (-1, 0, 1):
        k = np.clip(best + shift, 0, slopes.size - 1)
        values = np.maximum(values, heads[k] - slopes[k] * alpha)
    return values


def tradeoff_from_privacy_profile(
    alpha: npt.ArrayLike, eps_grid: npt.ArrayLike, delta_of_eps: npt.ArrayLike
) -> np.ndarray:
    """Trade-off function implied by a privacy profile ``δ(ε)`` on a grid of ``ε ≥ 0``.

    ``f(a) = sup_ε max(0, 1 − δ(ε) − e^ε a, e^{−ε}(1 − δ(ε) − a))`` ([1]_ Prop. 2.12;
    privacy-math.md §4): the upper envelope of the lines of every ``(ε, δ(ε))`` guarantee. A
    hockey-stick profile is convex in ``x = e^ε``, so in each family the intercepts are concave
    in the slopes and the envelope is found by binary search (:func:`_upper_envelope`):
    ``O((n + m) log m)`` for ``n`` values of ``a`` and ``m`` grid points, exact for the lines
    given. It is exact as the grid refines when ``δ`` is the profile of a symmetric pair; for an
    asymmetric pair pass the larger δ of the two directions (as a PLD accountant reports): the
    result is the symmetrised, conservative curve. For a PLD whose losses are multiples of
    ``h``, ``δ`` is ``A − e^ε B`` between multiples of ``h``, so the sup over ``ε`` sits on them
    and that grid makes the conversion exact.

    Parameters
    ----------
    alpha
        Type-I errors in [0, 1].
    eps_grid
        Finite ``ε ≥ 0``, strictly increasing (1-D).
    delta_of_eps
        ``δ(ε)`` at each grid point, in [0, 1].
    """
    a = as_alpha(alpha)
    eps = np.asarray(eps_grid, dtype=float)
    delta = np.asarray(delta_of_eps, dtype=float)
    if eps.ndim != 1 or eps.shape != delta.shape or eps.size == 0:
        raise InputError("eps_grid", eps.shape, "a non-empty 1-D grid the shape of delta_of_eps")
    if np.any(~np.isfinite(eps)) or np.any(eps < 0) or np.any(np.diff(eps) <= 0):
        raise InputError("eps_grid", eps_grid, "finite, strictly increasing epsilons >= 0")
    if np.any(~(delta >= 0.0) | ~(delta <= 1.0)):
        raise InputError("delta_of_eps", delta_of_eps, "deltas in [0, 1]")
    head = 1.0 - delta
    flat = a.ravel()
    steep = _upper_envelope(flat, np.exp(eps), head)
    shallow = _upper_envelope(flat, np.exp(-eps[::-1]), (np.exp(-eps) * head)[::-1])
    return np.maximum(np.maximum(steep, shallow), 0.0).reshape(a.shape)
