"""log_iv against mpmath: relative error of the log < 1e-10, ν ∈ [0, 1e6], x ∈ [1e-6, 1e7].

The oracle is ``mpmath.besseli`` for ν < 1000; for larger orders its hypergeometric series
does not converge at large x, so it is the integral representation DLMF 10.32.2 evaluated by
mpmath quadrature (a positive integrand: no cancellation), itself checked against
``besseli`` where both work.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from fedpriv.special.bessel import log_iv

TOL = 1e-10


def _log_iv_integral(nu: float, x: float) -> float:
    """log I_ν(x) = ν log(x/2) − log Γ(ν+½) − ½ log π + log ∫_{−1}^{1} (1−t²)^{ν−½} e^{xt} dt."""
    with mpmath.workdps(30):
        a, x_mp = mpmath.mpf(nu) - mpmath.mpf(0.5), mpmath.mpf(x)
        assert a > 0, "oracle written for nu > 1/2"
        peak = (-a + mpmath.sqrt(a * a + x_mp * x_mp)) / x_mp
        width = 1 / mpmath.sqrt(2 * a * (1 + peak**2) / (1 - peak**2) ** 2)

        def log_integrand(t: mpmath.mpf) -> mpmath.mpf:
            return a * mpmath.log1p(-t * t) + x_mp * t

        top = log_integrand(peak)
        cuts = {min(1, max(-1, peak + k * width)) for k in (-40, -10, -3, 0, 3, 10, 40)}
        points = sorted(cuts | {mpmath.mpf(-1), mpmath.mpf(1)})
        area = mpmath.quad(lambda t: mpmath.exp(log_integrand(t) - top), points)
        head = nu * mpmath.log(x_mp / 2) - mpmath.loggamma(a + 1) - mpmath.log(mpmath.pi) / 2
        return float(head + top + mpmath.log(area))


def _reference(nu: float, x: float) -> float:
    if nu >= 1000:
        return _log_iv_integral(nu, x)
    with mpmath.workdps(30):
        return float(mpmath.log(mpmath.besseli(mpmath.mpf(nu), mpmath.mpf(x))))


def _check_grid(nus: np.ndarray, xs: np.ndarray) -> None:
    grid_nu, grid_x = np.meshgrid(nus, xs, indexing="ij")
    ours = log_iv(grid_nu, grid_x)
    assert np.all(np.isfinite(ours))
    ref = np.vectorize(_reference)(grid_nu, grid_x)
    rel = np.abs(ours - ref) / np.abs(ref)
    worst = np.unravel_index(np.argmax(rel), rel.shape)
    assert rel.max() < TOL, (grid_nu[worst], grid_x[worst], ours[worst], ref[worst])


@pytest.mark.parametrize(("nu", "x"), [(1000.0, 1e-3), (1000.0, 50.0), (2000.5, 3e3), (5e3, 5e3)])
def test_integral_oracle_matches_besseli(nu: float, x: float) -> None:
    with mpmath.workdps(30):
        direct = float(mpmath.log(mpmath.besseli(mpmath.mpf(nu), mpmath.mpf(x))))
    assert _log_iv_integral(nu, x) == pytest.approx(direct, rel=1e-14)


def test_log_iv_matches_mpmath_on_log_grid() -> None:
    _check_grid(np.concatenate([[0.0], np.logspace(-3, 6, 13)]), np.logspace(-6, 7, 14))


@pytest.mark.slow
def test_log_iv_matches_mpmath_on_dense_grid_and_random_points() -> None:
    _check_grid(np.concatenate([[0.0], np.logspace(-3, 6, 37)]), np.logspace(-6, 7, 40))
    rng = np.random.default_rng(20261121)
    nus, xs = 10 ** rng.uniform(-3, 6, 300), 10 ** rng.uniform(-6, 7, 300)
    ref = np.array([_reference(n, x) for n, x in zip(nus, xs, strict=True)])
    assert np.max(np.abs(log_iv(nus, xs) - ref) / np.abs(ref)) < TOL


def test_small_argument_keeps_relative_accuracy() -> None:
    """log I₀(x) = x²/4 − x⁴/64 + …: tiny, where log(ive) + x would cancel."""
    x = np.array([1e-6, 1e-4, 1e-2])
    expected = x**2 / 4 - x**4 / 64 + x**6 / 576
    np.testing.assert_allclose(log_iv(0.0, x), expected, rtol=1e-12)


def test_closed_form_half_order() -> None:
    """I_{1/2}(x) = sqrt(2/(πx)) sinh x, across all three branches' range of x."""
    x = np.logspace(-6, 2.5, 30)
    expected = 0.5 * np.log(2 / (np.pi * x)) + np.log(np.sinh(x))
    np.testing.assert_allclose(log_iv(0.5, x), expected, rtol=1e-12)


def test_broadcasting_and_domain() -> None:
    assert log_iv(np.array([[0.0], [6849.0]]), np.array([1.0, 1e4])).shape == (2, 2)
    assert np.ndim(log_iv(1.0, 2.0)) == 0
    with pytest.raises(ValueError):
        log_iv(-1.0, 1.0)
    with pytest.raises(ValueError):
        log_iv(1.0, 0.0)
