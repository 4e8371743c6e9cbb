"""Rényi-DP curves of ONE unsubsampled release of each noise mechanism (privacy-math.md §3).

Each function maps an array of orders ``α ≥ 1`` to ``τ_α``, the Rényi divergence of the
mechanism's dominating pair; ``α = 1`` gives the KL divergence (the limit of the formula).
The curves are for a unit sensitivity: ``noise_multiplier`` and ``laplace_scale`` are the noise
scale divided by the clipping bound, as everywhere in fedpriv.

Poisson subsampling, composition and conversion to (ε, δ) live in their own modules; the
subsampled Gaussian is never re-derived here (it comes from dp-accounting).

References
----------
.. [1] I. Mironov, "Rényi differential privacy", CSF 2017, arXiv:1702.07476, Prop. 7 (Gaussian)
   and Prop. 6 / Table II (Laplace).
.. [2] Biswas et al., "Comparing privacy notions for protection against reconstruction attacks
   in machine learning", arXiv:2502.04045, Prop. 1 (VMF, antipodal centres) and Prop. 2
   (independent blocks add).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fedpriv.errors import InputError
from fedpriv.special.bessel import log_iv

__all__ = ["as_orders", "gaussian_rdp", "laplace_rdp", "vmf_kl", "vmf_rdp"]


def as_orders(orders: npt.ArrayLike) -> np.ndarray:
    """``orders`` as a 1-D float array, checked to be finite and ``≥ 1``."""
    a = np.atleast_1d(np.asarray(orders, dtype=float))
    if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 1.0):
        raise InputError("orders", orders, "finite Rényi orders >= 1")
    return a


def _positive(key: str, value: float) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0.0):
        raise InputError(key, value, "a finite number > 0")
    return v


def gaussian_rdp(orders: npt.ArrayLike, noise_multiplier: float) -> np.ndarray:
    """RDP of the Gaussian mechanism: ``τ_α = α / (2σ²)`` ([1], Prop. 7).

    Parameters
    ----------
    orders
        Orders ``α ≥ 1`` (``α = 1`` is the KL divergence, the same formula).
    noise_multiplier
        ``σ ≥ 0``, the noise standard deviation over the ℓ2 sensitivity; ``σ = 0`` gives ``inf``.
    """
    a = as_orders(orders)
    sigma = float(noise_multiplier)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise InputError("noise_multiplier", noise_multiplier, "a finite number >= 0")
    if sigma == 0.0:
        return np.full_like(a, np.inf)
    return a / (2.0 * sigma * sigma)


def laplace_rdp(orders: npt.ArrayLike, laplace_scale: float) -> np.ndarray:
    """RDP of the Laplace mechanism with ``λ = b / C`` (privacy-math.md §3, [1] Prop. 6).

    ``τ_α = 1/(α−1) · log(α/(2α−1)·e^{(α−1)/λ} + (α−1)/(2α−1)·e^{−α/λ})``, evaluated as
    ``ε + log1p((α−1)·expm1(−(2α−1)ε)/(2α−1))/(α−1)`` with ``ε = 1/λ`` (the same expression
    with ``e^{(α−1)ε}`` factored out; no overflow). ``α = 1``: ``KL = ε + e^{−ε} − 1``.
    Bounded by the pure parameter ``ε = 1/λ``, its limit as ``α → ∞``.
    """
    a = as_orders(orders)
    eps = 1.0 / _positive("laplace_scale", laplace_scale)
    out = np.full_like(a, eps + math.expm1(-eps))
    big = a > 1.0
    ab = a[big]
    out[big] = eps + np.log1p((ab - 1.0) * np.expm1(-(2.0 * ab - 1.0) * eps) / (2.0 * ab - 1.0)) / (
        ab - 1.0
    )
    return out


def vmf_kl(kappa: float, dim: int) -> float:
    """KL divergence of the antipodal VMF pair: ``2κ I_{ν+1}(κ)/I_ν(κ) = 2κ A_p(κ)`` ([2], Prop. 1).

    The spec states it as the bound ``τ₁ ≤ 2κ I_{ν+1}(κ)/I_ν(κ)``; for the antipodal pair it is
    the exact limit of ``τ_α`` as ``α → 1`` (``E_P[2κ xᵀy]``).
    """
    k, nu = _vmf_args(kappa, dim)
    return float(2.0 * k * np.exp(log_iv(nu + 1.0, k) - log_iv(nu, k)))


def vmf_rdp(orders: npt.ArrayLike, kappa: float, dim: int) -> np.ndarray:
    """RDP of one VMF release on ``S^{dim−1}``, antipodal centres ([2], Prop. 1).

    ``τ_α = ν/(α−1)·log(1/(2α−1)) + [log I_ν((2α−1)κ) − log I_ν(κ)]/(α−1)``, ``ν = dim/2 − 1``,
    in log-space with :func:`fedpriv.special.bessel.log_iv`; ``α = 1`` gives :func:`vmf_kl`.
    ``R`` independent VMF blocks add their curves ([2], Prop. 2).

    Parameters
    ----------
    orders
        Orders ``α ≥ 1``.
    kappa
        Concentration ``κ > 0``.
    dim
        Dimension ``p ≥ 2`` of the released vector (the sphere is ``S^{p−1}``).
    """
    a = as_orders(orders)
    k, nu = _vmf_args(kappa, dim)
    out = np.full_like(a, vmf_kl(k, dim))
    big = a > 1.0
    am1 = a[big] - 1.0
    log_ratio = log_iv(nu, (2.0 * am1 + 1.0) * k) - log_iv(nu, k)
    out[big] = (log_ratio - nu * np.log1p(2.0 * am1)) / am1
    return out


def _vmf_args(kappa: float, dim: int) -> tuple[float, float]:
    k = _positive("kappa", kappa)
    if isinstance(dim, bool) or int(dim) != dim or dim < 2:
        raise InputError("dim", dim, "an integer >= 2 (VMF lives on the sphere S^(dim-1))")
    return k, int(dim) / 2.0 - 1.0
