"""Sampling as it happens (privacy-math.md §14) and the tightest route (§15), each number against
an independent computation: dp-accounting's own accountants, quadrature of the hockey-stick
divergence, the spec's independently computed brackets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pld_support import assert_pessimistic_close
from scipy import integrate, stats

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.accounting.mixture_pld import mixture_pld
from fedpriv.commands.account import account
from fedpriv.errors import InputError
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import make_release

DELTA = 1e-5
SIGMA, N, M, STEPS = 1.5, 100, 10, 91


def _dp_accounting_pld(sigma: float, q: float, steps: int) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(DELTA)


def _fixed(neighbouring: str, accountant: str = "tightest") -> dict:
    return account("gaussian", noise_multiplier=SIGMA, sampling="fixed-size", population=N,
                   sample_size=M, steps=STEPS, neighbouring=neighbouring, accountant=accountant)


def test_fixed_size_replace_one_lies_in_the_independent_bracket() -> None:
    """The tight replace-one pair of a fixed-size sample: 5.83 [5.824, 5.833] (spec §14, an
    independent PLD); dp-accounting's sampled-without-replacement RDP is a looser bound."""
    out = _fixed("replace-one")
    assert 5.824 <= out["epsilon"] <= 5.833 and out["route"] == "pld"
    assert out["sampling"] == "fixed-size" and out["neighbouring"] == "replace-one"
    assert (out["population"], out["sample_size"]) == (N, M)
    rdp = _fixed("replace-one", "rdp")
    assert rdp["epsilon"] > out["epsilon"] and out["routes"]["rdp"] == rdp["epsilon"]


def test_fixed_size_add_remove_is_the_doubled_release_at_m_over_n_plus_one() -> None:
    out = _fixed("add-remove")
    expected = _dp_accounting_pld(SIGMA / 2, M / (N + 1), STEPS)
    assert_pessimistic_close(out["epsilon"], expected)
    assert out["epsilon"] == pytest.approx(11.92, abs=0.1)


def test_poisson_is_unchanged() -> None:
    out = account("gaussian", noise_multiplier=SIGMA, sample_rate=0.1, steps=STEPS)
    assert_pessimistic_close(out["epsilon"], _dp_accounting_pld(SIGMA, 0.1, STEPS))
    assert out["epsilon"] == pytest.approx(3.374, abs=1e-3)
    assert out["delta"] == DELTA and out["accountant"] == "tightest"


def _exact_delta(law: str, scale: float, q: float, eps: float) -> float:
    """``∫ (p − e^ε q)_+`` of the replace-one pair by adaptive quadrature."""
    dist = stats.norm if law == "gaussian" else stats.laplace

    def p(x: float) -> float:
        return (1 - q) * dist.pdf(x / scale) / scale + q * dist.pdf((x - 1) / scale) / scale

    def r(x: float) -> float:
        return (1 - q) * dist.pdf(x / scale) / scale + q * dist.pdf((x + 1) / scale) / scale

    width = 40 * scale + 2
    value, _ = integrate.quad(lambda x: max(p(x) - math.exp(eps) * r(x), 0.0), -width, width,
                              points=[-1.0, 0.0, 1.0], limit=500, epsabs=1e-14)
    return value


@pytest.mark.parametrize(("law", "scale", "q"), [("gaussian", 1.0, 0.3), ("gaussian", 0.5, 1.0),
                                                 ("laplace", 1.0, 0.3), ("laplace", 2.0, 1.0)])
def test_one_replace_one_release_against_quadrature(law: str, scale: float, q: float) -> None:
    """The PLD's δ(ε) is an upper bound on the exact hockey-stick divergence, and close to it."""
    pld = mixture_pld(law, scale, q, 1e-4)
    for eps in (0.05, 0.3, 1.0):
        exact = _exact_delta(law, scale, q, eps)
        got = pld.get_delta_for_epsilon(eps)
        assert exact * (1 - 1e-9) <= got <= exact + 1e-4 * max(exact, 1e-6)


def test_unsampled_replace_one_is_the_release_at_twice_its_sensitivity() -> None:
    one = epsilon([ReleaseEvent(make_release("gaussian", SIGMA), 1.0, 10)], DELTA,
                  accountant="pld", neighbouring="replace-one").epsilon
    assert one == pytest.approx(_dp_accounting_pld(SIGMA / 2, 1.0, 10), rel=1e-3)


def test_tightest_is_the_least_valid_route_and_names_it() -> None:
    events = [ReleaseEvent(make_release("gaussian", 1.1), 0.01, 1000)]
    routes = {name: epsilon(events, DELTA, accountant=name).epsilon for name in ("pld", "rdp")}
    best = epsilon(events, DELTA, accountant="tightest")
    assert best.epsilon == min(routes.values()) and best.route == "pld"
    assert best.routes["pld"] == routes["pld"] and best.routes["rdp"] == routes["rdp"]


def test_whole_gradient_vmf_by_default_is_the_pld() -> None:
    """Spec §15: κ = 400, p = 13,700, q = 128/60,000, 1,407 steps: PLD 239.0 (independent
    bracket [239.0, 240.0]) against 36,225 by RDP."""
    out = account("vmf", kappa=400.0, dim=13_700, sample_rate=128 / 60_000, steps=1407)
    assert 239.0 * 0.99 <= out["epsilon"] <= 240.0 and out["route"] == "pld"
    assert out["routes"]["rdp"] > 100 * out["epsilon"]


def test_a_fixed_size_event_must_be_m_of_n() -> None:
    release = make_release("gaussian", 1.0)
    with pytest.raises(InputError, match="sample_rate"):
        ReleaseEvent(release, 0.15, 3, population=10)
    with pytest.raises(InputError, match="population"):
        ReleaseEvent(release, 0.5, 3, population=0)
    assert ReleaseEvent(release, 0.1, 3, population=100).sample_size == 10


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"sampling": "fixed-size", "population": 10, "sample_size": 11}, "--sample-size"),
    ({"sampling": "fixed-size", "population": 10, "sample_size": 5, "sample_rate": 0.5},
     "--sample-rate"),
    ({"sampling": "poisson", "sample_rate": 0.1, "population": 10}, "--population"),
    ({"sampling": "fixed-size", "sample_size": 5}, "--population"),
    ({"sampling": "poisson", "sample_rate": 1.5}, "--sample-rate"),
    ({"sampling": "stratified", "sample_rate": 0.1}, "--sampling"),
    ({"sample_rate": 0.1, "neighbouring": "swap"}, "--neighbouring"),
])
def test_bad_sampling_flags_name_the_flag(kwargs: dict, key: str) -> None:
    with pytest.raises(InputError) as err:
        account("gaussian", noise_multiplier=1.0, steps=10, **kwargs)
    assert err.value.key == key


def test_fixed_size_record_batches_in_the_ledger_as_the_command_accounts_them() -> None:
    """``train.sampling = "fixed"``: batches of 8 of a client's 200 records."""
    for relation in ("add-remove", "replace-one"):
        ledger = PrivacyLedger(DELTA, "pld", neighbouring=relation)
        for rnd in (1, 2):
            row = ledger.fold(rnd, 0, make_release("gaussian", 1.2), steps=5,
                              sample_rate=8 / 200, population=200, batch_size=8, dim=10)
        cli = account("gaussian", noise_multiplier=1.2, sampling="fixed-size", population=200,
                      sample_size=8, steps=10, accountant="pld", neighbouring=relation)
        assert row["epsilon"] == pytest.approx(cli["epsilon"], rel=1e-12)
        assert row["sampling"] == "fixed-size" and row["neighbouring"] == f"{relation} one record"
    poisson = PrivacyLedger(DELTA, "pld").fold(1, 0, make_release("gaussian", 1.2), steps=10,
                                               sample_rate=8 / 200, batch_size=8, dim=10)
    assert poisson["epsilon"] < row["epsilon"]  # fixed-size never looks better than Poisson


def test_mixture_pld_is_monotone_in_the_noise() -> None:
    values = [mixture_pld("gaussian", s, 0.2, 1e-4).self_compose(20).get_epsilon_for_delta(DELTA)
              for s in np.linspace(0.8, 2.0, 5)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False))
