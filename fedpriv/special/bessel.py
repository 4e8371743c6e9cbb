"""Numerically stable logarithms of the modified Bessel function of the first kind.

No maintained library offers ``log I_ν(x)`` for orders in the thousands (``scipy.special.ive``
underflows to 0 for ν ≈ 7,000 at moderate x, and returns nan beyond x ≈ 1e9 at every order),
nor the exponentially scaled forms without cancellation at x up to 1e300, so they are written
here, as the spec (``privacy-math.md`` §2, "Log-Bessel for huge orders") prescribes. Branches:

* ``x ≤ 1``: the ascending power series (DLMF 10.25.2) in log form,
  ``ν log(x/2) − log Γ(ν+1) + log1p(Σ_{k≥1} (x²/4)^k / (k! (ν+1)_k))``: it keeps full relative
  accuracy where ``log I_ν(x)`` is tiny (``log I₀(x) ≈ x²/4``), which ``log(ive) + x`` loses
  to cancellation;
* ``ν < 100`` and ``x ≥ 1e7``: Hankel's large-argument expansion (DLMF 10.40.1) of
  ``√(2πx) e^{−x} I_ν(x)``, eight terms (each at most 5e-4 times the one before);
* where ``ive(ν, x)`` is a normal double: ``log(ive(ν, x))``;
* otherwise (ν ≥ 100 where ``ive`` underflows or fails): Debye's uniform expansion
  (DLMF 10.41.3) with four correction terms, rearranged so that ``log I_ν(x) − x`` is formed
  without subtracting ``x`` (``η − z = 1/(√(1+z²) + z) − asinh(1/z)``, ``√(1+z²)`` as
  ``hypot``), which keeps it exact to rounding up to x = 1e300.

:func:`log_normalized_ive` is ``log(Γ(ν+1) (2/x)^ν I_ν(x) e^{−x}) = log ₀F₁(; ν+1; x²/4) − x``
(DLMF 10.39.9), the quantity the VMF Bayes capacity needs: its terms of size ``ν log ν``
cancel analytically, so for ν ≥ 100 it is taken from the Debye expansion combined with
Stirling's series for ``log Γ(ν+1)`` (DLMF 5.11.1) term by term, and for ``x ≤ 20`` from the
series alone (48 positive terms).

References
----------
.. [1] NIST Digital Library of Mathematical Functions, §10.41(ii), eqs. 10.41.3, 10.41.10 and
   10.41.11 (the Debye polynomials u₁…u₄); §10.25, eq. 10.25.2 (ascending series); §10.40,
   eqs. 10.40.1 and 10.17.1 (Hankel's expansion); §10.39, eq. 10.39.9; §5.11, eq. 5.11.1.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import special

__all__ = ["log_iv", "log_ive", "log_normalized_ive"]

# ive below this is treated as underflowed: its relative accuracy degrades near the
# subnormal range, and the Debye expansion is then accurate to far better than 1e-10.
_IVE_FLOOR = 1e-280
# Up to this argument the ascending series is used; with 12 terms the first omitted term is
# at most (1/4)^13 / (13!)^2 ≈ 4e-28 (absolute error of the log1p argument).
_SERIES_MAX_X = 1.0
_SERIES_TERMS = 12
# log_normalized_ive sums the series (positive terms: no cancellation) up to x = 20, where
# term 49 is at most 100^49 / (49!)² < 1e-28 of the sum: its value then has no rounding jitter
# from large cancelling terms, which keeps the VMF capacity monotone to the last bits.
_LONG_SERIES_MAX_X = 20.0
_LONG_SERIES_TERMS = 48
# Orders from which the Debye expansion is used by log_normalized_ive: its first omitted term
# is |u₅(t)|/ν⁵ ≤ 7.8e-4/ν⁵ (u₅(1) is Stirling's coefficient), 8e-14 at ν = 100.
_DEBYE_MIN_NU = 100.0
# Hankel's expansion for ν < 100 from this argument: term ratio (4ν² − (2k−1)²)/(8kx) < 5e-4.
_HANKEL_MIN_X = 1e7
_HANKEL_TERMS = 8
# Stirling's series: log Γ(ν+1) − (ν+½) log ν + ν − ½ log 2π = Σ B₂ₖ / (2k(2k−1) ν^{2k−1}).
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)


def _series_log1p_tail(
    nu: np.ndarray, x: np.ndarray, terms: int = _SERIES_TERMS
) -> np.ndarray:
    """``log ₀F₁(; ν+1; x²/4) = log1p(Σ_{k≥1} (x²/4)^k / (k! (ν+1)_k))`` (DLMF 10.25.2)."""
    quarter_x2 = 0.25 * x * x
    term = np.ones_like(x)
    tail = np.zeros_like(x)
    for k in range(1, terms + 1):
        term = term * quarter_x2 / (k * (nu + k))
        tail = tail + term
    return np.log1p(tail)


def _series_log_iv(nu: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Ascending series of ``log I_ν(x)``, accurate for ``x ≤ 1``."""
    return nu * np.log(0.5 * x) - special.gammaln(nu + 1.0) + _series_log1p_tail(nu, x)


def _hankel_log_ive(nu: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``log(e^{−x} I_ν(x))`` by Hankel's expansion (DLMF 10.40.1), for ``x ≫ ν²``."""
    mu = 4.0 * nu * nu
    term = np.ones_like(x)
    total = np.ones_like(x)
    for k in range(1, _HANKEL_TERMS + 1):
        term = -term * (mu - (2 * k - 1) ** 2) / (8.0 * k * x)
        total = total + term
    return -0.5 * np.log(2.0 * np.pi * x) + np.log(total)


def _debye_parts(nu: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``z = x/ν``, ``√(1+z²)`` and ``log1p(Σ u_k(t)/ν^k)`` of the Debye expansion."""
    z = x / nu
    root = np.hypot(1.0, z)
    t = 1.0 / root
    t2 = t * t
    u1 = t * (3.0 - 5.0 * t2) / 24.0
    u2 = t2 * (81.0 - 462.0 * t2 + 385.0 * t2 * t2) / 1152.0
    u3 = t * t2 * (30375.0 - 369603.0 * t2 + 765765.0 * t2**2 - 425425.0 * t2**3) / 414720.0
    u4 = (
        t2
        * t2
        * (
            4465125.0
            - 94121676.0 * t2
            + 349922430.0 * t2**2
            - 446185740.0 * t2**3
            + 185910725.0 * t2**4
        )
        / 39813120.0
    )
    series = np.log1p(u1 / nu + u2 / nu**2 + u3 / nu**3 + u4 / nu**4)
    return z, root, series


def _debye_log_ive(nu: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``log I_ν(νz) − νz`` (DLMF 10.41.3) with ``η − z`` formed without cancellation, ν > 0."""
    z, root, series = _debye_parts(nu, x)
    eta_minus_z = 1.0 / (root + z) - np.arcsinh(1.0 / z)
    return -0.5 * np.log(2.0 * np.pi * nu) + nu * eta_minus_z - 0.5 * np.log(root) + series


def _debye_log_normalized_ive(nu: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``log(Γ(ν+1)(2/x)^ν I_ν(x)) − x`` from Debye and Stirling, the ``ν log ν`` terms cancelled:
    ``−ν(z + w)/(√(1+z²) + z) − ν log1p(w/2) − ½ log √(1+z²) + log1p(Σu_k/ν^k) + S(ν)`` with
    ``w = √(1+z²) − 1 = z²/(1 + √(1+z²))`` (``1/(√(1+z²)+z) − 1`` rewritten: no cancellation)."""
    z, root, series = _debye_parts(nu, x)
    w = z * (z / (1.0 + root))
    stirling = sum(c / nu ** (2 * k + 1) for k, c in enumerate(_STIRLING))
    return (
        -nu * (z + w) / (root + z)
        - nu * np.log1p(0.5 * w)
        - 0.5 * np.log(root)
        + series
        + stirling
    )


def _checked(nu: npt.ArrayLike, x: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    nu_a, x_a = np.broadcast_arrays(np.asarray(nu, dtype=float), np.asarray(x, dtype=float))
    if np.any(nu_a < 0) or np.any(~np.isfinite(nu_a)):
        raise ValueError("log_iv: order nu must be finite and >= 0")
    if np.any(x_a <= 0) or np.any(~np.isfinite(x_a)):
        raise ValueError("log_iv: argument x must be finite and > 0")
    return nu_a, x_a


def log_ive(nu: npt.ArrayLike, x: npt.ArrayLike) -> np.ndarray:
    """Return ``log I_ν(x) − x`` (the log of ``scipy.special.ive``) without cancellation.

    Valid for every order ``ν ≥ 0`` and finite argument ``x > 0`` (``x`` up to 1e300: for large
    ``x`` it is ``−½ log(2πx) − (4ν²−1)/(8x) + …``, where ``log I_ν(x)`` and ``x`` agree to
    all digits); branches in the module docstring. Tested against mpmath (relative error below
    1e-10 on ν ∈ [0, 10⁶], x ∈ [10⁻⁶, 10³⁰⁰]).

    Parameters
    ----------
    nu
        Order(s) ν ≥ 0.
    x
        Argument(s) x > 0.

    Raises
    ------
    ValueError
        If any ν < 0 or x ≤ 0, or either is not finite.
    """
    nu_a, x_a = _checked(nu, x)
    with np.errstate(under="ignore", invalid="ignore"):
        scaled = special.ive(nu_a, x_a)
    series = x_a <= _SERIES_MAX_X
    hankel = ~series & (nu_a < _DEBYE_MIN_NU) & (x_a >= _HANKEL_MIN_X)
    use_ive = ~(series | hankel) & (scaled > _IVE_FLOOR) & np.isfinite(scaled)
    debye = ~(series | hankel | use_ive)
    out = np.empty_like(x_a)
    out[series] = _series_log_iv(nu_a[series], x_a[series]) - x_a[series]
    out[hankel] = _hankel_log_ive(nu_a[hankel], x_a[hankel])
    out[use_ive] = np.log(scaled[use_ive])
    if np.any(debye):
        out[debye] = _debye_log_ive(nu_a[debye], x_a[debye])
    return out if out.ndim else out[()]


def log_iv(nu: npt.ArrayLike, x: npt.ArrayLike) -> np.ndarray:
    """Return ``log I_ν(x)`` for orders ``ν ≥ 0`` and arguments ``x > 0``, broadcasting.

    Accurate to a relative error of the log below 1e-10 for ν ∈ [0, 10⁶], x ∈ [10⁻⁶, 10⁷]
    (tested against ``mpmath.besseli``), finite up to x = 1e300; never returns inf or nan.

    Parameters
    ----------
    nu
        Order(s) ν ≥ 0.
    x
        Argument(s) x > 0.

    Raises
    ------
    ValueError
        If any ν < 0 or x ≤ 0 (outside the domain this function is validated on).
    """
    nu_a, x_a = _checked(nu, x)
    series = x_a <= _SERIES_MAX_X
    out = np.empty_like(x_a)
    out[series] = _series_log_iv(nu_a[series], x_a[series])
    rest = ~series
    out[rest] = log_ive(nu_a[rest], x_a[rest]) + x_a[rest]
    return out if out.ndim else out[()]


def log_normalized_ive(nu: npt.ArrayLike, x: npt.ArrayLike) -> np.ndarray:
    """Return ``log(Γ(ν+1) (2/x)^ν I_ν(x) e^{−x}) = log ₀F₁(; ν+1; x²/4) − x`` (DLMF 10.39.9).

    ``−log_normalized_ive(p/2 − 1, κ)`` is the log Bayes capacity of the VMF mechanism
    (privacy-math.md §5). It is ``−x + x²/(4(ν+1)) + …`` for small ``x`` and
    ``ν log(x/2) − log Γ(ν+1) − ½ log(2πx) + …`` for large ``x``; it is computed without
    forming those large terms separately: the series for ``x ≤ 20`` (positive terms, full
    relative accuracy), Debye + Stirling for ν ≥ 100, else
    ``log_ive − ν log(x/2) + log Γ(ν+1)`` (terms below ``100·log x``). Tested against mpmath at
    50 digits for ν up to 5·10⁶ and x up to 1e300.

    Parameters
    ----------
    nu
        Order(s) ν ≥ 0.
    x
        Argument(s) x > 0.

    Raises
    ------
    ValueError
        If any ν < 0 or x ≤ 0, or either is not finite.
    """
    nu_a, x_a = _checked(nu, x)
    series = x_a <= _LONG_SERIES_MAX_X
    debye = ~series & (nu_a >= _DEBYE_MIN_NU)
    rest = ~(series | debye)
    out = np.empty_like(x_a)
    nu_s, x_s = nu_a[series], x_a[series]
    out[series] = _series_log1p_tail(nu_s, x_s, _LONG_SERIES_TERMS) - x_s
    out[debye] = _debye_log_normalized_ive(nu_a[debye], x_a[debye])
    n, r = nu_a[rest], x_a[rest]
    out[rest] = log_ive(n, r) - n * np.log(0.5 * r) + special.gammaln(n + 1.0)
    return out if out.ndim else out[()]

