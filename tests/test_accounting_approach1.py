"""Approach 1 (amplify a single-release (ε₀, δ₀) and compose with Kairouz et al.)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from fedpriv.accounting.accountant import epsilon
from fedpriv.accounting.approach1 import (
    APPROACH1_ORDERS,
    amplify,
    approach1,
    kairouz_epsilon,
    log_delta_for_epsilon0,
)
from fedpriv.accounting.events import Release, ReleaseEvent
from fedpriv.accounting.rdp import laplace_rdp, vmf_rdp
from fedpriv.commands.account import account
from fedpriv.mechanisms.laplace import LaplaceRelease
from fedpriv.mechanisms.vmf import VMFRelease


@pytest.mark.parametrize(
    ("curve", "q", "steps", "delta"),
    [(lambda a: vmf_rdp(a, 58.6, 13_700), 128 / 60000, 1407, 1 / 60000),
     (lambda a: vmf_rdp(a, 2.0, 5), 1.0, 1, 1e-3),
     (lambda a: laplace_rdp(a, 1.0), 0.1, 3, 1e-5),
     (lambda a: laplace_rdp(a, 0.5), 0.01, 10_000, 1e-6)],
)
def test_total_delta_within_target(curve, q: float, steps: int, delta: float) -> None:
    out = approach1(curve, q, steps, delta)
    assert math.isfinite(out.epsilon) and 0 < out.delta <= delta
    recomputed = 1 - (1 - q * out.delta0) ** steps * (1 - out.delta_tilde)
    assert recomputed <= delta * (1 + 1e-9)


def test_delta_of_epsilon0_upper_bounds_the_exact_laplace_profile() -> None:
    """Laplace(λ=1), sensitivity 1: δ(ε) = 1 − e^{(ε−1)/2} for 0 ≤ ε ≤ 1 (exact)."""
    eps0 = np.array([0.1, 0.4, 0.8, 0.95])
    log_d, _ = log_delta_for_epsilon0(eps0, APPROACH1_ORDERS, laplace_rdp(APPROACH1_ORDERS, 1.0))
    exact = 1 - np.exp((eps0 - 1) / 2)
    assert np.all(np.exp(log_d) >= exact)
    assert np.all(np.exp(log_d) <= 3 * exact)


def test_delta_of_epsilon0_upper_bounds_the_exact_vmf_profile() -> None:
    kappa, m = 2.0, 1.0  # dim = 5
    f = lambda t, s: math.exp(s * kappa * t) * (1 - t * t) ** m  # noqa: E731
    z = integrate.quad(f, -1, 1, args=(1,))[0]
    for e0 in (0.2, 1.0, 2.5):
        c = e0 / (2 * kappa)
        exact = (integrate.quad(f, c, 1, args=(1,))[0]
                 - math.exp(e0) * integrate.quad(f, c, 1, args=(-1,))[0]) / z
        log_d, _ = log_delta_for_epsilon0([e0], APPROACH1_ORDERS, vmf_rdp(APPROACH1_ORDERS, 2.0, 5))
        assert math.exp(log_d[0]) >= exact


def test_kairouz_properties() -> None:
    eps = np.array([0.01, 0.1, 1.0])
    np.testing.assert_allclose(kairouz_epsilon(eps, 1, 1e-6), eps)
    many = kairouz_epsilon(eps, 1000, 1e-6)
    assert np.all(many <= 1000 * eps)
    assert np.all(kairouz_epsilon(eps, 1000, 1e-3) <= many)
    assert many[0] < 1000 * eps[0] / 2  # the advanced-composition branches matter


def test_amplification() -> None:
    eps_s, log_ds = amplify([0.5, 2.0], [math.log(1e-6)] * 2, 1.0)
    np.testing.assert_allclose(eps_s, [0.5, 2.0])
    eps_s, log_ds = amplify([0.5, 2.0], [math.log(1e-6)] * 2, 0.01)
    np.testing.assert_allclose(eps_s, np.log1p(0.01 * np.expm1([0.5, 2.0])))
    np.testing.assert_allclose(np.exp(log_ds), 1e-8)


@pytest.mark.parametrize(
    ("release", "q", "steps", "winner"),
    [(LaplaceRelease(1.0), 0.1, 3, "approach1"), (VMFRelease(5.0, 50), 0.01, 10, "rdp")],
)
def test_best_is_the_least_route(release: Release, q: float, steps: int, winner: str) -> None:
    events = [ReleaseEvent(release, q, steps)]
    best = epsilon(events, 1e-5, route="best")
    each = {r: epsilon(events, 1e-5, route=r).epsilon for r in ("rdp", "approach1")}
    assert best.epsilon == min(each.values())
    assert best.route == winner and dict(best.routes) == each


def test_per_step_composition_exceeds_per_epoch() -> None:
    common = dict(kappa=58.6, dim=13_700, sample_rate=128 / 60000, epochs=3, delta=1 / 60000)
    step = account("vmf", **common)
    epoch = account("vmf", compose="per-epoch", **common)
    assert step["steps"] == math.ceil(3 * 60000 / 128) and epoch["steps"] == 3
    assert step["epsilon"] > epoch["epsilon"]
    assert any("UNDERSTATES" in w for w in epoch["warnings"])


def test_kept_step1_gives_the_result_computed_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 1 (δ(ε₀) of one unsubsampled release) is kept per RDP curve and grid across calls:
    rounds and clients with other q, T, δ reuse it, and get exactly what an evaluation from
    scratch (``log_delta_for_epsilon0`` on every call) gives."""
    from fedpriv.accounting import approach1 as module

    curve = LaplaceRelease(0.7).rdp
    settings = [(0.1, 3, 1e-5), (0.1, 30, 1e-5), (0.02, 300, 1e-6), (1.0, 1, 1e-5)]
    kept = [module.approach1(curve, q, t, d) for q, t, d in settings for _ in range(2)]
    monkeypatch.setattr(module, "_step1", lambda eps0, orders, rdp, which:
                        module.log_delta_for_epsilon0(eps0, orders, rdp))
    fresh = [module.approach1(curve, q, t, d) for q, t, d in settings for _ in range(2)]
    assert kept == fresh
