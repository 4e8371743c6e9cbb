"""The Gaussian routes agree with dp-accounting's own accountants (and Opacus if installed)."""

from __future__ import annotations

import pytest
from pld_support import assert_pessimistic_close

from fedpriv.accounting.accountant import epsilon
from fedpriv.accounting.events import ReleaseEvent
from fedpriv.commands.account import account
from fedpriv.mechanisms.gaussian import GaussianRelease

REF = dict(sigma=1.23, q=128 / 60000, steps=1407, delta=1 / 60000)
SETTINGS = [(1.23, 128 / 60000, 1407, 1 / 60000), (1.0, 0.01, 300, 1e-5), (3.0, 0.1, 40, 1e-6)]


def _dp_accounting(kind: str, sigma: float, q: float, steps: int, delta: float) -> float:
    from dp_accounting import dp_event, pld, rdp

    acc = rdp.RdpAccountant() if kind == "rdp" else pld.PLDAccountant()
    event = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
    acc.compose(dp_event.SelfComposedDpEvent(event, steps))
    return acc.get_epsilon(delta)


def _mine(kind: str, sigma: float, q: float, steps: int, delta: float) -> float:
    events = [ReleaseEvent(GaussianRelease(sigma), q, steps)]
    return epsilon(events, delta, accountant=kind, route="rdp").epsilon


@pytest.mark.parametrize("kind", ["rdp", "pld"])
@pytest.mark.parametrize(("sigma", "q", "steps", "delta"), SETTINGS)
def test_agrees_with_dp_accounting(kind: str, sigma: float, q: float, steps: int, delta: float):
    expected = _dp_accounting(kind, sigma, q, steps, delta)
    if kind == "pld":  # dp-accounting's grid is 1e-4, fedpriv's a hundredth of the loss spread
        assert_pessimistic_close(_mine(kind, sigma, q, steps, delta), expected)
    else:
        assert _mine(kind, sigma, q, steps, delta) == pytest.approx(expected, rel=1e-6)


def test_reference_setting_through_the_cli_api() -> None:
    """docs/accounting.md: RDP ≈ 0.4829, PLD ≈ 0.2624 — computed here by the library itself."""
    s, q, t, d = REF.values()
    rdp_lib, pld_lib = _dp_accounting("rdp", s, q, t, d), _dp_accounting("pld", s, q, t, d)
    assert rdp_lib == pytest.approx(0.4829, abs=1e-4)
    assert pld_lib == pytest.approx(0.2624, abs=1e-4)
    common = dict(noise_multiplier=s, sample_rate=q, steps=t, delta=d)
    out_rdp = account("gaussian", accountant="rdp", route="rdp", **common)
    out_pld = account("gaussian", accountant="pld", **common)
    assert out_rdp["epsilon"] == pytest.approx(rdp_lib, rel=1e-6)
    assert out_rdp["optimal_order"] == 18.0
    assert (out_pld["accountant"], out_pld["optimal_order"]) == ("pld", None)
    assert_pessimistic_close(out_pld["epsilon"], pld_lib)


def test_agrees_with_opacus_rdp_if_installed() -> None:
    analysis = pytest.importorskip("opacus.accountants.analysis.rdp")
    from fedpriv.accounting.conversion import DEFAULT_ORDERS

    s, q, t, d = REF.values()
    rdp = analysis.compute_rdp(q=q, noise_multiplier=s, steps=t, orders=list(DEFAULT_ORDERS))
    eps, _ = analysis.get_privacy_spent(orders=list(DEFAULT_ORDERS), rdp=rdp, delta=d)
    assert _mine("rdp", s, q, t, d) == pytest.approx(eps, rel=1e-4)
