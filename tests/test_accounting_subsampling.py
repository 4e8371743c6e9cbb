"""Zhu–Wang Poisson subsampling (Thm. 5) against dp-accounting's exact subsampled Gaussian."""

from __future__ import annotations

import numpy as np
import pytest

from fedpriv.accounting.conversion import DEFAULT_ORDERS, rdp_to_epsilon
from fedpriv.accounting.dp_library import gaussian_subsampled_rdp
from fedpriv.accounting.rdp import gaussian_rdp, laplace_rdp, vmf_kl, vmf_rdp
from fedpriv.accounting.subsampling import subsampled_rdp, zhu_wang_rdp

GRID = np.array(DEFAULT_ORDERS)


def _gauss(sigma: float):
    return lambda orders: gaussian_rdp(orders, sigma)


@pytest.mark.parametrize(("sigma", "q"), [(0.7, 0.01), (1.23, 128 / 60000), (2.0, 0.05)])
def test_zhu_wang_upper_bounds_exact_subsampled_gaussian(sigma: float, q: float) -> None:
    """An upper bound on integer AND fractional orders (the latter via the CGF chord)."""
    exact = gaussian_subsampled_rdp(DEFAULT_ORDERS, sigma, q)
    ints = np.arange(2.0, 64.0)
    raw = zhu_wang_rdp(ints, _gauss(sigma), q)
    assert np.all(raw >= gaussian_subsampled_rdp(ints, sigma, q) * (1 - 1e-10))
    assert np.all(subsampled_rdp(GRID, _gauss(sigma), q) >= exact * (1 - 1e-10))


@pytest.mark.parametrize(("sigma", "rel"), [(1.0, 0.05), (1.23, 0.06), (2.0, 0.15)])
def test_zhu_wang_gaussian_epsilon_close_to_exact(sigma: float, rel: float) -> None:
    q, steps, delta = 128 / 60000, 1407, 1 / 60000
    exact = rdp_to_epsilon(GRID, steps * gaussian_subsampled_rdp(GRID, sigma, q), delta).epsilon
    bound = rdp_to_epsilon(GRID, steps * subsampled_rdp(GRID, _gauss(sigma), q), delta).epsilon
    assert exact <= bound <= exact * (1 + rel)


@pytest.mark.parametrize(
    "curve",
    [
        lambda a: laplace_rdp(a, 1.0),
        lambda a: vmf_rdp(a, 5.0, 50),
        lambda a: vmf_rdp(a, 58.6, 13_700),
    ],
)
def test_raw_bound_below_unsubsampled_at_small_rate(curve) -> None:
    ints = np.arange(2.0, 40.0)
    assert np.all(zhu_wang_rdp(ints, curve, 0.01) <= curve(ints))


def test_order_one_is_q_times_kl() -> None:
    kappa, dim, q = 3.0, 10, 0.05
    value = subsampled_rdp([1.0], lambda a: vmf_rdp(a, kappa, dim), q)[0]
    assert value == pytest.approx(q * vmf_kl(kappa, dim), rel=1e-12)


def test_full_rate_returns_the_curve() -> None:
    curve = lambda a: vmf_rdp(a, 7.0, 30)  # noqa: E731
    np.testing.assert_array_equal(subsampled_rdp(GRID, curve, 1.0), curve(GRID))


def test_log_space_survives_huge_divergences() -> None:
    """(ℓ−1)τ_ℓ reaches 10^7 here: a linear-space sum would overflow."""
    curve = lambda a: vmf_rdp(a, 1e4, 10)  # noqa: E731
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        out = subsampled_rdp(GRID, curve, 0.01)
    assert np.all(np.isfinite(out)) and np.all(out <= curve(GRID))


def test_subsampled_epsilon_below_unsubsampled() -> None:
    curve = lambda a: vmf_rdp(a, 20.0, 1000)  # noqa: E731
    for q in (0.001, 0.05, 0.5):
        sub = rdp_to_epsilon(GRID, 100 * subsampled_rdp(GRID, curve, q), 1e-5).epsilon
        full = rdp_to_epsilon(GRID, 100 * curve(GRID), 1e-5).epsilon
        assert sub < full
