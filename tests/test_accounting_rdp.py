"""Single-release RDP curves against direct numerical integration of the Rényi divergence."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from fedpriv.accounting.rdp import gaussian_rdp, laplace_rdp, vmf_kl, vmf_rdp
from fedpriv.errors import InputError


def _laplace_renyi_quad(alpha: float, lam: float) -> float:
    """D_α(Lap(0, λ) ‖ Lap(1, λ)) by quadrature on the three pieces of the real line."""

    def log_p(x: float, mu: float) -> float:
        return -abs(x - mu) / lam - math.log(2.0 * lam)

    if alpha == 1.0:
        f = lambda x: math.exp(log_p(x, 0.0)) * (log_p(x, 0.0) - log_p(x, 1.0))  # noqa: E731
    else:
        f = lambda x: math.exp(alpha * log_p(x, 0.0) + (1 - alpha) * log_p(x, 1.0))  # noqa: E731
    pieces = [(-np.inf, 0.0), (0.0, 1.0), (1.0, np.inf)]
    total = sum(integrate.quad(f, a, b, epsabs=0, epsrel=1e-12, limit=200)[0] for a, b in pieces)
    return total if alpha == 1.0 else math.log(total) / (alpha - 1.0)


@pytest.mark.parametrize("lam", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("alpha", [1.0, 1.5, 2.0, 5.0, 20.0])
def test_laplace_rdp_matches_quadrature(alpha: float, lam: float) -> None:
    expected = _laplace_renyi_quad(alpha, lam)
    assert laplace_rdp([alpha], lam)[0] == pytest.approx(expected, rel=1e-8, abs=1e-13)


@pytest.mark.parametrize("lam", [0.2, 1.0, 4.0])
def test_laplace_rdp_tends_to_pure_epsilon_from_below(lam: float) -> None:
    orders = np.geomspace(1.01, 1e7, 60)
    tau = laplace_rdp(orders, lam)
    assert np.all(np.diff(tau) >= -1e-12)
    assert np.all(tau <= 1.0 / lam + 1e-12)
    assert tau[-1] == pytest.approx(1.0 / lam, rel=1e-5)


def _vmf_renyi_mpmath(alpha: float, kappa: float, dim: int) -> mp.mpf:
    """D_α(VMF(x) ‖ VMF(−x)) from the 1-D laws of t = xᵀy, ∝ e^{±κt}(1−t²)^{(p−3)/2}."""
    m = mp.mpf(dim - 3) / 2
    z = mp.quad(lambda t: mp.exp(kappa * t) * (1 - t * t) ** m, [-1, 0, 1])

    def g(t, sign):
        return mp.exp(sign * kappa * t) * (1 - t * t) ** m / z

    integral = mp.quad(lambda t: g(t, 1) ** alpha * g(t, -1) ** (1 - alpha), [-1, 0, 1])
    return mp.log(integral) / (alpha - 1)


@pytest.mark.parametrize("dim", [3, 5])
@pytest.mark.parametrize("kappa", [0.5, 2.0, 10.0])
@pytest.mark.parametrize("alpha", [1.5, 2.0, 3.0, 10.0])
def test_vmf_rdp_matches_mpmath_integration(alpha: float, kappa: float, dim: int) -> None:
    with mp.workdps(30):
        expected = float(_vmf_renyi_mpmath(alpha, kappa, dim))
    assert vmf_rdp([alpha], kappa, dim)[0] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("kappa", "dim"), [(0.5, 3), (3.0, 5), (40.0, 100), (58.6, 13_700)])
def test_vmf_kl_limit(kappa: float, dim: int) -> None:
    nu = dim / 2 - 1
    with mp.workdps(30):
        bound = float(2 * kappa * mp.besseli(nu + 1, kappa) / mp.besseli(nu, kappa))
    assert vmf_kl(kappa, dim) == pytest.approx(bound, rel=1e-9)
    near_one = vmf_rdp([1.0 + 1e-6, 1.0], kappa, dim)
    assert near_one[0] == pytest.approx(bound, rel=1e-4)
    assert near_one[1] == pytest.approx(bound, rel=1e-9)


@pytest.mark.parametrize(("kappa", "dim"), [(1.0, 3), (50.0, 20), (58.6, 13_700)])
def test_vmf_rdp_increasing_in_order_and_below_pure_bound(kappa: float, dim: int) -> None:
    tau = vmf_rdp(np.geomspace(1.01, 1e5, 80), kappa, dim)
    assert np.all(np.diff(tau) >= -1e-9 * tau[1:])
    assert np.all(tau <= 2.0 * kappa * (1 + 1e-9))


@pytest.mark.parametrize("kappa", [10.0, 58.6])
def test_vmf_behaves_like_gaussian_at_large_dim(kappa: float) -> None:
    dim, orders = 13_700, np.array([1.5, 2.0, 5.0])
    sigma = math.sqrt(dim) / (2 * kappa)
    ratio = vmf_rdp(orders, kappa, dim) / gaussian_rdp(orders, sigma)
    np.testing.assert_allclose(ratio, 1.0, rtol=1e-2)


_orders = st.floats(1.05, 200.0)


@settings(max_examples=60, deadline=None)
@given(alpha=_orders, k1=st.floats(1.0, 5e3), k2=st.floats(1.0, 5e3), dim=st.integers(2, 50_000))
def test_vmf_rdp_increasing_in_kappa(alpha: float, k1: float, k2: float, dim: int) -> None:
    lo, hi = sorted((k1, k2))
    a, b = vmf_rdp([alpha], lo, dim)[0], vmf_rdp([alpha], hi, dim)[0]
    assert a <= b * (1 + 1e-9) + 1e-12


@settings(max_examples=60, deadline=None)
@given(alpha=_orders, kappa=st.floats(0.1, 5e3), d1=st.integers(2, 50_000),
       d2=st.integers(2, 50_000))
def test_vmf_rdp_decreasing_in_dimension(alpha: float, kappa: float, d1: int, d2: int) -> None:
    lo, hi = sorted((d1, d2))
    a, b = vmf_rdp([alpha], kappa, lo)[0], vmf_rdp([alpha], kappa, hi)[0]
    assert b <= a * (1 + 1e-9) + 1e-12


def test_gaussian_rdp_matches_dp_accounting() -> None:
    from dp_accounting import dp_event, rdp

    orders = [1.5, 2.0, 7.0, 64.0]
    acc = rdp.RdpAccountant(orders=orders)
    acc.compose(dp_event.GaussianDpEvent(0.8))
    np.testing.assert_allclose(gaussian_rdp(orders, 0.8), acc.rdp, rtol=1e-12)
    assert np.all(np.isinf(gaussian_rdp(orders, 0.0)))


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda: laplace_rdp([2.0], 0.0), "laplace_scale"),
        (lambda: vmf_rdp([2.0], -1.0, 5), "kappa"),
        (lambda: vmf_rdp([2.0], 1.0, 1), "dim"),
        (lambda: vmf_rdp([0.5], 1.0, 5), "orders"),
        (lambda: gaussian_rdp([2.0], -1.0), "noise_multiplier"),
    ],
)
def test_bad_parameters_raise_input_error(call, key: str) -> None:
    with pytest.raises(InputError) as err:
        call()
    assert err.value.key == key
