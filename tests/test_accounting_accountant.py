"""The per-client ledger: heterogeneous composition, grouping, no-guarantee releases."""

from __future__ import annotations

import math

import pytest

from fedpriv.accounting.accountant import ClientAccountant, epsilon
from fedpriv.accounting.events import ReleaseEvent
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism
from fedpriv.mechanisms.gaussian import GaussianRelease
from fedpriv.mechanisms.laplace import LaplaceRelease
from fedpriv.mechanisms.vmf import VMFRelease

Q, DELTA = 0.01, 1e-5


def _dp_accounting_mixed(kind: str, sigmas: list[float], steps: int) -> float:
    from dp_accounting import dp_event, pld, rdp

    acc = rdp.RdpAccountant() if kind == "rdp" else pld.PLDAccountant()
    events = [dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(s)), steps) for s in sigmas]
    acc.compose(dp_event.ComposedDpEvent(events))
    return acc.get_epsilon(DELTA)


@pytest.mark.parametrize("kind", ["rdp", "pld"])
def test_heterogeneous_gaussian_rounds_compose_like_dp_accounting(kind: str) -> None:
    sigmas = [1.5, 2.5, 1.5, 3.0, 2.5]
    acc = ClientAccountant(accountant=kind, route="rdp")
    for s in sigmas:
        acc.record(GaussianRelease(s), sample_rate=Q, steps=30)
    expected = _dp_accounting_mixed(kind, sigmas, 30)
    assert acc.epsilon(DELTA) == pytest.approx(expected, rel=1e-6)


def test_mixed_vmf_ledger_lies_between_its_homogeneous_extremes() -> None:
    acc = ClientAccountant()
    for kappa in (20.0, 40.0) * 10:
        acc.record(VMFRelease(kappa, 1000), sample_rate=Q, steps=5)
    low = epsilon([ReleaseEvent(VMFRelease(20.0, 1000), Q, 100)], DELTA).epsilon
    high = epsilon([ReleaseEvent(VMFRelease(40.0, 1000), Q, 100)], DELTA).epsilon
    mixed = acc.result(DELTA)
    assert low < mixed.epsilon < high
    assert mixed.route == "rdp" and any("approach 1 skipped" in w for w in mixed.warnings)


def test_rounds_group_into_one_event() -> None:
    rounds = [ReleaseEvent(VMFRelease(30.0, 500), Q, 7)] * 40
    single = [ReleaseEvent(VMFRelease(30.0, 500), Q, 280)]
    assert epsilon(rounds, DELTA).epsilon == pytest.approx(epsilon(single, DELTA).epsilon,
                                                           rel=1e-12)


def test_pld_ledger_tighter_than_rdp_for_mixed_vmf() -> None:
    events = [ReleaseEvent(VMFRelease(k, 50), 0.05, 20) for k in (1.0, 2.0)]
    rdp = epsilon(events, DELTA).epsilon
    pld = epsilon(events, DELTA, accountant="pld").epsilon
    assert 0 < pld <= rdp


@pytest.mark.parametrize(
    ("name", "params"),
    [("none", {}), ("clip", {"clip": 1.0}), ("gaussian", {"noise_multiplier": 0.0}),
     ("vmf", {"kappa": 10.0, "vmf_keep_norm": True})],
)
def test_no_formal_guarantee_gives_infinite_epsilon(name: str, params: dict) -> None:
    acc = ClientAccountant()
    acc.record(GaussianRelease(1.0), sample_rate=Q, steps=10)
    acc.record(build_mechanism(name, params).release(100), sample_rate=Q, steps=10)
    result = acc.result(DELTA)
    assert math.isinf(result.epsilon) and result.warnings


def test_empty_ledger_has_zero_epsilon() -> None:
    assert ClientAccountant().epsilon(DELTA) == 0.0


@pytest.mark.parametrize(
    ("make", "key"),
    [(lambda: VMFRelease(5.0, 1), "dim"), (lambda: VMFRelease(0.0, 10), "kappa"),
     (lambda: LaplaceRelease(0.0), "laplace_scale"),
     (lambda: GaussianRelease(math.inf), "noise_multiplier")],
)
def test_releases_validate(make, key: str) -> None:
    with pytest.raises(InputError) as err:
        make()
    assert err.value.key == key


@pytest.mark.parametrize(
    ("rate", "steps", "key"),
    [(0.0, 1, "sample_rate"), (1.5, 1, "sample_rate"), (0.1, 0, "steps"), (0.1, 2.5, "steps")],
)
def test_event_validates(rate: float, steps, key: str) -> None:
    with pytest.raises(InputError) as err:
        ReleaseEvent(GaussianRelease(1.0), rate, steps)
    assert err.value.key == key
