"""log_ive and log_normalized_ive against mpmath at 50 digits, x up to 1e300.

The oracle (``bessel_support.mp_log_ive``) works at ``60 + log10 x`` digits, because
``log I_ν(x) − x`` cancels all of ``x``'s digits when formed from ``log I_ν(x)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from bessel_support import mp_log_ive, mp_log_normalized_ive

from fedpriv.special.bessel import log_iv, log_ive, log_normalized_ive

TOL = 1e-12
NUS = [0.0, 0.5, 1.0, 5.5, 49.0, 99.0, 100.0, 150.0, 999.0, 1000.0, 6849.0, 1e5, 5e6]
XS = [1e-6, 0.5, 1.0, 1.5, 10.0, 20.0, 21.0, 1e3, 1e6, 9.99e6, 1e7, 1e9, 1e12, 1e20, 1e25,
      1e80, 1e100, 1e300]


def _worst(ours: np.ndarray, oracle, nus, xs) -> float:
    ref = np.array([[float(oracle(n, x)) for x in xs] for n in nus])
    assert np.all(np.isfinite(ours))
    return float(np.max(np.abs(ours - ref) / np.abs(ref)))


@pytest.mark.slow
def test_log_ive_matches_mpmath_up_to_1e300() -> None:
    grid_nu, grid_x = np.meshgrid(NUS, XS, indexing="ij")
    assert _worst(log_ive(grid_nu, grid_x), mp_log_ive, NUS, XS) < TOL
    assert _worst(log_normalized_ive(grid_nu, grid_x), mp_log_normalized_ive, NUS, XS) < TOL


@pytest.mark.parametrize("nu", [0.0, 5.5, 99.0, 100.0, 6849.0, 5e6])
@pytest.mark.parametrize("x", [1.5, 21.0, 1e7, 1e20, 1e300])
def test_scaled_forms_match_mpmath(nu: float, x: float) -> None:
    assert float(log_ive(nu, x)) == pytest.approx(float(mp_log_ive(nu, x)), rel=TOL)
    expected = float(mp_log_normalized_ive(nu, x))
    assert float(log_normalized_ive(nu, x)) == pytest.approx(expected, rel=TOL)


def test_large_argument_limit_and_no_cancellation() -> None:
    """x ≫ ν²: log I_ν(x) − x = −½ log(2πx) − (4ν²−1)/(8x) + O(x⁻²) (DLMF 10.40.1); the old
    ``log I_ν(x) − x`` route returned 0 or garbage here."""
    x = np.array([1e20, 1e80, 1e300])
    for nu in (0.0, 6849.0):
        expected = -0.5 * np.log(2 * np.pi * x) - (4 * nu * nu - 1) / (8 * x)
        np.testing.assert_allclose(log_ive(nu, x), expected, rtol=1e-15)
        np.testing.assert_allclose(log_iv(nu, x), x + expected, rtol=1e-15)


def test_domain() -> None:
    for f in (log_ive, log_normalized_ive):
        with pytest.raises(ValueError):
            f(-1.0, 1.0)
        with pytest.raises(ValueError):
            f(1.0, np.inf)
        assert np.ndim(f(1.0, 2.0)) == 0
