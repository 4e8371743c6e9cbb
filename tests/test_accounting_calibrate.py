"""Calibration by bisection: never overshoots the target, lands just below it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedpriv.accounting.calibrate import calibrate as calibrate_release
from fedpriv.errors import InputError
from fedpriv.mechanisms import release_class


def calibrate(mechanism: str, target: float, *, dim: int | None = None, **kwargs):
    """Calibrate the named mechanism, starting where its release class says."""
    return calibrate_release(release_class(mechanism).calibration_start(dim), target, **kwargs)


@settings(max_examples=20, deadline=None)
@given(
    mechanism=st.sampled_from(["vmf", "laplace"]),
    target=st.floats(0.1, 10.0),
    q=st.floats(1e-3, 0.2),
    steps=st.integers(1, 3000),
    dim=st.integers(2, 20_000),
)
def test_never_overshoots(mechanism: str, target: float, q: float, steps: int, dim: int):
    cal = calibrate(mechanism, target, delta=1e-5, sample_rate=q, steps=steps, dim=dim,
                    route="rdp")
    assert cal.result.epsilon <= target
    assert cal.result.epsilon >= target * (1 - 1e-3)


def test_vmf_best_route_calibration() -> None:
    cal = calibrate("vmf", 1.0, delta=1 / 60000, sample_rate=128 / 60000, steps=1407,
                    dim=13_700)
    assert cal.parameter_name == "kappa"
    assert 1.0 * (1 - 2e-3) <= cal.result.epsilon <= 1.0


def test_gaussian_rdp_matches_dp_accounting_calibration() -> None:
    from dp_accounting import dp_event, mechanism_calibration, rdp

    q, steps, delta = 128 / 60000, 1407, 1 / 60000
    sigma = mechanism_calibration.calibrate_dp_mechanism(
        rdp.RdpAccountant,
        lambda s: dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), steps),
        1.0, delta, tol=1e-7)
    cal = calibrate("gaussian", 1.0, delta=delta, sample_rate=q, steps=steps, route="rdp")
    assert cal.parameter == pytest.approx(sigma, rel=1e-3)
    assert cal.parameter >= sigma * (1 - 1e-6)  # never less noise than the exact root
    assert cal.parameter == pytest.approx(0.911, abs=2e-3)  # docs/accounting.md


@pytest.mark.slow
def test_gaussian_pld_calibration_at_reference() -> None:
    """docs/accounting.md: PLD/PRV calibrate σ ≈ 0.738 for ε = 1 at the reference setting."""
    cal = calibrate("gaussian", 1.0, delta=1 / 60000, sample_rate=128 / 60000, steps=1407,
                    accountant="pld")
    assert cal.parameter == pytest.approx(0.738, abs=3e-3)
    assert cal.result.epsilon <= 1.0


def test_unreachable_target_is_an_input_error() -> None:
    with pytest.raises(InputError) as err:
        calibrate("vmf", 1e-4, delta=1e-5, sample_rate=0.5, steps=10_000, dim=10)
    assert err.value.key == "target_epsilon"
