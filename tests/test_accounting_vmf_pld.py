"""The tight VMF route (PLD) against exact single-release privacy profiles and the RDP route."""

from __future__ import annotations

import math

import pytest
from scipy import integrate, optimize

from fedpriv.accounting.accountant import epsilon
from fedpriv.accounting.events import ReleaseEvent
from fedpriv.accounting.vmf_pld import vmf_pld
from fedpriv.mechanisms.laplace import LaplaceRelease
from fedpriv.mechanisms.vmf import VMFRelease


class _ExactVmf:
    """Exact δ(ε) of one Poisson-subsampled VMF release, by quadrature of the laws of t."""

    def __init__(self, kappa: float, dim: int, q: float) -> None:
        self.kappa, self.m, self.q = kappa, (dim - 3) / 2, q
        # scale by the density at its mode (t* solves κ(1−t²) = 2mt) so nothing overflows
        self.peak = kappa / (self.m + math.sqrt(self.m**2 + kappa**2))
        self.shift = kappa * self.peak + (self.m * math.log1p(-self.peak**2) if self.m else 0.0)
        self.z = self._mass(1, -1.0, 1.0)

    def _mass(self, sign: int, a: float, b: float) -> float:
        a, b = max(a, -1.0), min(b, 1.0)
        if a >= b:
            return 0.0
        f = lambda t: math.exp(sign * self.kappa * t + self.m * math.log1p(-t * t)  # noqa: E731
                               - self.shift)
        points = [x for x in (-self.peak, 0.0, self.peak) if a < x < b]
        return integrate.quad(f, a, b, epsabs=0, epsrel=1e-12, limit=500, points=points)[0]

    def delta(self, eps: float) -> float:
        """max over remove (U vs Q) and add (Q vs U), U = (1−q)Q + qP."""
        q, k, z = self.q, self.kappa, self.z
        cut = math.log((math.expm1(eps) + q) / q) / (2 * k) if math.expm1(eps) + q > 0 else -2
        remove = (q * self._mass(1, cut, 1) - (math.expm1(eps) + q) * self._mass(-1, cut, 1)) / z
        gap = 1 - math.exp(eps) * (1 - q)
        if gap <= 0:
            return max(remove, 0.0)
        cut_add = math.log(gap / (math.exp(eps) * q)) / (2 * k)
        add = (gap * self._mass(-1, -1, cut_add) - math.exp(eps) * q * self._mass(1, -1, cut_add))
        return max(remove, add / z, 0.0)


@pytest.mark.parametrize(
    ("kappa", "dim", "q", "step"),
    [(1.0, 3, 1.0, 1e-4), (2.0, 5, 0.1, 1e-4), (5.0, 50, 0.2, 1e-5), (0.5, 4, 0.5, 1e-4),
     (58.6, 13_700, 1.0, 1e-4), (200.0, 13_700, 0.05, 1e-4)],
)
def test_single_release_pld_sandwiches_exact_delta(kappa, dim, q, step) -> None:
    """Pessimistic: δ(ε) ≤ δ_PLD(ε) ≤ δ(ε − Δ) (losses rounded up by at most Δ)."""
    exact = _ExactVmf(kappa, dim, q)
    pld = vmf_pld(kappa, dim, q, discretization=step)
    for eps in (0.0, 0.05, 0.3, 1.0):
        got = float(pld.get_delta_for_epsilon(eps))
        assert exact.delta(eps) * (1 - 1e-9) <= got <= exact.delta(eps - step) * (1 + 1e-9) + 1e-15


def test_all_routes_upper_bound_the_exact_single_release_epsilon() -> None:
    kappa, dim, delta = 2.0, 5, 1e-3
    exact = _ExactVmf(kappa, dim, 1.0)
    truth = optimize.brentq(lambda e: exact.delta(e) - delta, 0.0, 2 * kappa, xtol=1e-12)
    events = [ReleaseEvent(VMFRelease(kappa, dim), 1.0, 1)]
    for route in ("rdp", "approach1"):
        assert epsilon(events, delta, route=route).epsilon >= truth
    pld = epsilon(events, delta, accountant="pld", discretization=1e-4).epsilon
    assert truth <= pld <= truth + 1e-3


@pytest.mark.parametrize(
    ("kappa", "dim", "q", "steps"),
    [(30.0, 13_700, 128 / 60000, 1407), (2.0, 50, 0.05, 100), (1.0, 3, 0.01, 300)],
)
def test_pld_tighter_than_rdp(kappa: float, dim: int, q: float, steps: int) -> None:
    events = [ReleaseEvent(VMFRelease(kappa, dim), q, steps)]
    rdp = epsilon(events, 1 / 60000).epsilon
    pld = epsilon(events, 1 / 60000, accountant="pld").epsilon
    assert 0 < pld <= rdp


def test_laplace_pld_matches_dp_accounting() -> None:
    from dp_accounting import dp_event, pld

    acc = pld.PLDAccountant()
    event = dp_event.PoissonSampledDpEvent(0.01, dp_event.LaplaceDpEvent(2.0))
    acc.compose(dp_event.SelfComposedDpEvent(event, 500))
    mine = epsilon([ReleaseEvent(LaplaceRelease(2.0), 0.01, 500)], 1e-5, accountant="pld")
    assert mine.epsilon == pytest.approx(acc.get_epsilon(1e-5), rel=1e-6)
    rdp = epsilon([ReleaseEvent(LaplaceRelease(2.0), 0.01, 500)], 1e-5).epsilon
    assert mine.epsilon <= rdp


def test_oversized_pld_is_refused_with_a_clear_error() -> None:
    from fedpriv.errors import InputError

    with pytest.raises(InputError, match="rdp for kappa"):
        vmf_pld(5000.0, 13_700, 0.01)



def _irwin_hall3(s: float) -> float:
    """Density of the sum of three independent uniforms on [−1, 1]."""
    x = (s + 3.0) / 2.0
    if x <= 0 or x >= 3:
        return 0.0
    h = x * x / 2 if x < 1 else ((-2 * x * x + 6 * x - 3) / 2 if x < 2 else (3 - x) ** 2 / 2)
    return h / 2.0


@pytest.mark.parametrize("kappa", [0.5, 2.0])
def test_three_fold_composition_sandwiches_exact_delta(kappa: float) -> None:
    """p = 3, q = 1: t has density ∝ e^{κt} on [−1, 1], so the sum S of three releases has
    density ∝ e^{κs}·IrwinHall₃(s) and δ(ε) = E[(1 − e^{ε − 2κS})₊] exactly. Composed
    pessimistic PLDs satisfy δ(ε) ≤ δ_PLD(ε) ≤ δ(ε − 3Δ)."""
    step = 1e-4
    weight = lambda s: math.exp(kappa * s) * _irwin_hall3(s)  # noqa: E731
    z = integrate.quad(weight, -3, 3, points=[-1, 1], epsabs=0, epsrel=1e-12)[0]

    def exact(eps: float) -> float:
        lo = max(eps / (2 * kappa), -3.0)
        f = lambda s: weight(s) * -math.expm1(eps - 2 * kappa * s)  # noqa: E731
        pts = [p for p in (-1.0, 1.0) if lo < p < 3]
        return integrate.quad(f, lo, 3, points=pts or None, epsabs=0, epsrel=1e-12)[0] / z

    composed = vmf_pld(kappa, 3, 1.0, discretization=step).self_compose(3)
    for eps in (0.0, 0.5, 2.0, 4.0):
        got = float(composed.get_delta_for_epsilon(eps))
        assert exact(eps) * (1 - 1e-9) <= got <= exact(eps - 3 * step) * (1 + 1e-9) + 1e-14
