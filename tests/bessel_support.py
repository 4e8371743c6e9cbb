"""mpmath oracles for the exponentially scaled Bessel functions, to 50 significant digits.

``mpmath.besseli`` for ν < 1000 or x ≥ 10⁴ν²; otherwise (where its hypergeometric series does
not converge) the integral DLMF 10.32.2 with ``s = 1 − t``,
``I_ν(x) e^{−x} = (x/2)^ν / (√π Γ(ν+½)) ∫₀² (s(2−s))^{ν−½} e^{−xs} ds``, whose integrand has no
cancellation, by mpmath quadrature split around its peak. The working precision is
``60 + log10 x`` digits so that subtracting ``x`` from ``log I_ν(x)`` leaves 50.
"""

from __future__ import annotations

import mpmath
import numpy as np


def _integral_log_ive(nu: float, x: float) -> mpmath.mpf:
    a, xm = mpmath.mpf(nu) - mpmath.mpf(1) / 2, mpmath.mpf(x)
    b = 2 * xm + 2 * a
    peak = 4 * a / (b + mpmath.sqrt(b * b - 8 * a * xm))  # the root of a(2 − 2s) = x s(2 − s)
    width = 1 / mpmath.sqrt(a * (1 / peak**2 + 1 / (2 - peak) ** 2))

    def log_integrand(s: mpmath.mpf) -> mpmath.mpf:
        return a * mpmath.log(s * (2 - s)) - xm * s

    top = log_integrand(peak)
    cuts = {peak + k * width for k in (-40, -10, -3, 0, 3, 10, 40)}
    points = sorted({mpmath.mpf(0), mpmath.mpf(2)} | {c for c in cuts if 0 < c < 2})
    area = mpmath.quad(lambda s: mpmath.exp(log_integrand(s) - top), points)
    head = nu * mpmath.log(xm / 2) - mpmath.loggamma(a + 1) - mpmath.log(mpmath.pi) / 2
    return head + top + mpmath.log(area)


def mp_log_ive(nu: float, x: float) -> mpmath.mpf:
    """``log I_ν(x) − x`` to 50 significant digits."""
    with mpmath.workdps(60 + max(0, int(np.log10(x)))):
        if nu >= 1000 and x < 1e4 * nu * nu:
            return _integral_log_ive(nu, x)
        return mpmath.log(mpmath.besseli(nu, x)) - x


def mp_log_normalized_ive(nu: float, x: float) -> mpmath.mpf:
    with mpmath.workdps(60 + max(0, int(np.log10(x)))):
        return mp_log_ive(nu, x) - nu * mpmath.log(mpmath.mpf(x) / 2) + mpmath.loggamma(nu + 1)
