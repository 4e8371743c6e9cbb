"""The tight VMF route (PLD) against exact single-release privacy profiles, an independent
composition (``pld_support``: floor-rounded buckets, a rigorous lower bound) and the RDP route.

Where an exact answer is feasible: single releases at any κ (quadrature of the law of t,
``_ExactVmf``); compositions through the lower bound of ``pld_support`` while its bucket width
``h`` keeps ``T·h`` small against ε — at the paper settings (p = 13,700, q = 0.0021333,
T = 1,407) for all four κ of issue #16 (100, 500, 2,000, 10,000), with at most 2.1 million
buckets; and the three-fold composition at p = 3 in closed form.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from pld_support import epsilon_lower_bound, vmf_directions
from scipy import integrate, optimize

from fedpriv.accounting import pld_grid
from fedpriv.accounting.accountant import epsilon
from fedpriv.accounting.conversion import DEFAULT_ORDERS, rdp_to_epsilon
from fedpriv.accounting.events import ReleaseEvent
from fedpriv.accounting.pld_grid import choose_discretization
from fedpriv.accounting.rdp import vmf_rdp
from fedpriv.accounting.subsampling import subsampled_rdp
from fedpriv.accounting.vmf_pld import DEFAULT_DISCRETIZATION, vmf_grid_need, vmf_pld
from fedpriv.errors import InputError
from fedpriv.mechanisms.laplace import LaplaceRelease
from fedpriv.mechanisms.vmf import VMFRelease

PAPER = dict(dim=13_700, q=0.0021333, steps=1407, delta=1.6667e-5)


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


def _step_of(pld: object) -> float:
    return pld._pmf_remove._discretization  # type: ignore[attr-defined]  # the Δ dp-accounting holds


def _rdp_epsilon(kappa: float, dim: int, q: float, steps: int, delta: float) -> float:
    orders = np.array(DEFAULT_ORDERS)
    curve = subsampled_rdp(orders, lambda a: vmf_rdp(a, kappa, dim), q)
    return rdp_to_epsilon(orders, steps * curve, delta).epsilon


def _auto_epsilon(
    kappa: float, dim: int, q: float, steps: int, delta: float
) -> tuple[float, float]:
    """(ε, Δ) of the automatic-grid PLD composed ``steps`` times."""
    pld = vmf_pld(kappa, dim, q, steps=steps)
    composed = pld.self_compose(steps) if steps > 1 else pld
    return float(composed.get_epsilon_for_delta(delta)), _step_of(pld)


def test_automatic_grid_is_the_spec_default_where_it_fits() -> None:
    """The spec's 1e-5, or a hundredth of one release's loss spread where that is coarser."""
    for kappa in (10.0, 30.0):
        need = vmf_grid_need(kappa, PAPER["dim"], PAPER["q"], PAPER["steps"])
        expected = max(DEFAULT_DISCRETIZATION, need.loss_std / pld_grid.FINE_RESOLUTION)
        assert choose_discretization([need], DEFAULT_DISCRETIZATION) == expected
        assert _step_of(vmf_pld(kappa, PAPER["dim"], PAPER["q"],
                                steps=PAPER["steps"])) == pytest.approx(expected)
    assert expected > DEFAULT_DISCRETIZATION  # κ = 30: the spread, not the spec, sets Δ


def test_coarse_grid_is_within_two_percent_of_an_exact_lower_bound(monkeypatch) -> None:
    """A budget of 300,000 points forces Δ ≈ 3e-3 at κ = 500 (ε ≈ 395): the answer stays above
    the independent lower bound (it is pessimistic) and within 2 % of it, hence of the truth."""
    monkeypatch.setattr(pld_grid, "POINT_BUDGET", 300_000)
    kappa, dim, q, steps, delta = 500.0, PAPER["dim"], PAPER["q"], PAPER["steps"], PAPER["delta"]
    got, step = _auto_epsilon(kappa, dim, q, steps, delta)
    assert step > 20 * DEFAULT_DISCRETIZATION
    low = epsilon_lower_bound(vmf_directions(kappa, dim, q), steps, delta, h=5e-4)
    assert low <= got <= 1.02 * low
    assert got <= _rdp_epsilon(kappa, dim, q, steps, delta)


@pytest.mark.parametrize(("kappa", "q"), [(100.0, 1.0), (2000.0, 0.05)])
def test_coarse_single_release_sandwiches_exact_delta(monkeypatch, kappa: float, q: float) -> None:
    """δ(ε) ≤ δ_PLD(ε) ≤ δ(ε − Δ) at the Δ chosen; κ = 100, q = 1 (3.28 M points at 1e-5) was
    refused before; here a 200,000-point budget makes the grid coarse on purpose."""
    monkeypatch.setattr(pld_grid, "POINT_BUDGET", 200_000)
    exact = _ExactVmf(kappa, PAPER["dim"], q)
    pld = vmf_pld(kappa, PAPER["dim"], q)
    step = _step_of(pld)
    assert step > DEFAULT_DISCRETIZATION
    for eps in (0.0, 0.1 * kappa, 0.2 * kappa, 0.3 * kappa):
        got = float(pld.get_delta_for_epsilon(eps))
        assert exact.delta(eps) * (1 - 1e-9) <= got <= exact.delta(eps - step) * (1 + 1e-9) + 1e-15


@pytest.mark.slow
@pytest.mark.parametrize(("kappa", "h"), [(100.0, 1e-5), (500.0, 5e-4), (2000.0, 5e-3),
                                          (10_000.0, 0.1)])
def test_paper_settings_at_any_kappa(kappa: float, h: float) -> None:
    """Issue #16: the PLD at κ = 100 … 10,000 (refused before: 10.5 M / 85 M points at 1e-5)
    answers within 2 % of the exact value (bracketed below by floor-rounded buckets of width h,
    T·h/2 ≤ 0.3 % of ε) and never above the RDP bound (vacuous there: 56,500 at κ = 500)."""
    dim, q, steps, delta = PAPER["dim"], PAPER["q"], PAPER["steps"], PAPER["delta"]
    start = time.perf_counter()
    got, _ = _auto_epsilon(kappa, dim, q, steps, delta)
    seconds = time.perf_counter() - start
    low = epsilon_lower_bound(vmf_directions(kappa, dim, q), steps, delta, h)
    assert steps * h / 2 <= 0.003 * low
    assert low <= got <= 1.02 * low
    assert got <= _rdp_epsilon(kappa, dim, q, steps, delta)
    assert seconds < 180  # the aim is 60 s on 2 idle cores (benchmarks/vmf_pld.py records it)


def test_composed_sizes_match_the_prediction_and_the_budget(monkeypatch) -> None:
    """The sizes predicted before allocation are those dp-accounting allocates (here the
    composed window binds: 880 nats in 40,000 points, coarser than a hundredth of the loss
    spread)."""
    monkeypatch.setattr(pld_grid, "POINT_BUDGET", 40_000)
    steps = PAPER["steps"]
    need = vmf_grid_need(500.0, PAPER["dim"], PAPER["q"], steps)
    step = choose_discretization([need], DEFAULT_DISCRETIZATION)
    pld = vmf_pld(500.0, PAPER["dim"], PAPER["q"], steps=steps)
    composed = pld.self_compose(steps)
    pmfs = [(pld._pmf_remove, composed._pmf_remove), (pld._pmf_add, composed._pmf_add)]
    for law, (single, many) in zip(need.laws, pmfs, strict=True):
        assert single.size == pytest.approx(law.width / step, abs=3)
        assert many.size <= 40_000
    # the window that binds (remove: 880 nats; add: 57) as predicted, up to the coarse grid's
    # rounding, which widens it (pld_grid._MARGIN); the narrow add window is not predicted
    # as closely at this Δ (1.5×), and never binds
    window = pld_grid.composed_width(need.laws[0], steps) / step
    assert window * (1 - 5e-3) <= composed._pmf_remove.size <= window * 1.05


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [(dict(kappa=1e300), "kappa"), (dict(kappa=2e6), "kappa"), (dict(kappa=-1.0), "kappa"),
     (dict(dim=1), "dim"), (dict(dim=1e12), "dim"), (dict(steps=0), "steps"),
     (dict(steps=2.5), "steps"), (dict(steps=1e12), "steps"),
     (dict(sample_rate=0.0), "sample_rate"),
     (dict(discretization=1e-9, steps=1407), "discretization")],
)
def test_refusals_name_the_parameter_before_allocating(kwargs: dict, key: str) -> None:
    import tracemalloc

    args = dict(kappa=100.0, dim=13_700, sample_rate=0.0021333) | kwargs
    tracemalloc.start()
    with pytest.raises(InputError) as info:
        vmf_pld(**args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert info.value.key == key
    assert peak < 64 * 2**20  # the coarse law only (a few MB); the PLD would take hundreds


def test_too_many_steps_names_the_largest_count_that_fits() -> None:
    with pytest.raises(InputError, match=r"at most ([\d,]+) releases") as info:
        vmf_pld(100.0, 13_700, 0.0021333, steps=1e12)
    most = int(info.value.allowed.split("at most ")[1].split(" ")[0].replace(",", ""))
    need = vmf_grid_need(100.0, 13_700, 0.0021333, most)
    choose_discretization([need], DEFAULT_DISCRETIZATION)  # fits
    with pytest.raises(InputError):
        choose_discretization([vmf_grid_need(100.0, 13_700, 0.0021333, most + 1)],
                              DEFAULT_DISCRETIZATION)


def _log_tail(kappa: float, dim: int, sign: int, cut: float) -> float:
    """log of the mass of ``t > cut`` under the law ``∝ e^{sign κt}(1−t²)^{(p−3)/2}``: each
    integral is scaled by the density's maximum over its own interval (the law is unimodal), so
    that a tail of e^{-10⁶} keeps its digits; quadrature split around that maximum."""
    m = (dim - 3) / 2
    mode = sign * kappa / (m + math.sqrt(m * m + kappa * kappa)) if m else float(sign)

    def log_f(t: float) -> float:
        if not m:
            return sign * kappa * t
        return sign * kappa * t + m * math.log1p(-t * t) if abs(t) < 1 else -math.inf

    def log_mass(a: float, b: float) -> float:
        peak = min(max(mode, a), b)
        inner = min(max(peak, -1 + 1e-15), 1 - 1e-15)
        slope = abs(sign * kappa - 2 * m * inner / (1 - inner * inner))
        scales = (1 / math.sqrt(kappa + 2 * m + 1), 1 / max(slope, 1.0))
        pts = sorted({peak + k * w for w in scales for k in (-50, -5, -1, 1, 5, 50)
                      if a < peak + k * w < b})
        top = log_f(inner)
        f = lambda t: math.exp(log_f(t) - top)  # noqa: E731
        area = integrate.quad(f, a, b, points=pts or None, epsabs=0, epsrel=1e-10, limit=800)[0]
        return math.log(area) + top

    return log_mass(max(cut, -1.0), 1.0) - log_mass(-1.0, 1.0)


@pytest.mark.parametrize(("kappa", "dim"), [(1e6, 3), (1e6, 13_700), (1e6, 10**8), (100.0, 10**8),
                                            (1e-3, 10**8)])
def test_single_release_at_the_corners_of_the_validated_range(
    monkeypatch, kappa: float, dim: int
) -> None:
    """Unsubsampled, δ(ε) = P(t > c) − e^ε Q(t > c) with c = ε/(2κ), in log space; the PLD
    (automatic grid, 300,000-point budget) is sandwiched, δ(ε) ≤ δ_PLD(ε) ≤ δ(ε − Δ), at
    KAPPA_MAX and DIM_MAX."""
    monkeypatch.setattr(pld_grid, "POINT_BUDGET", 300_000)
    pld = vmf_pld(kappa, dim, 1.0)
    step = _step_of(pld)

    def exact(eps: float) -> float:
        cut = eps / (2 * kappa)
        if cut >= 1.0:
            return 0.0
        log_p, log_q = _log_tail(kappa, dim, 1, cut), _log_tail(kappa, dim, -1, cut)
        return math.exp(log_p) * -math.expm1(min(0.0, eps + log_q - log_p))

    scale = float(pld.get_epsilon_for_delta(1e-6))
    for eps in (0.0, 0.25 * scale, 0.5 * scale, 0.9 * scale):
        got = float(pld.get_delta_for_epsilon(eps))
        assert exact(eps) * (1 - 1e-7) <= got <= exact(eps - step) * (1 + 1e-7) + 1e-15
