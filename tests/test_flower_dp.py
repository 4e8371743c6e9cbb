"""Flower's own DP building blocks audited (issue 43, items 1–2; docs/flower-dp.md): Flower's DP
strategy wrappers and accountant, ``LocalDpMod`` and ``fixedclipping_mod``, driven through
``strategies.audit_strategy`` with Flower's own classes on the in-process grid, each ε checked
against dp-accounting computed here."""

from __future__ import annotations

import json
import math

import pytest
from dp_accounting import dp_event, pld, rdp
from flwr.app import ArrayRecord, ConfigRecord
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import LocalDpMod, fixedclipping_mod
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
)
from flwr.supercore.privacy_accounting import (
    NeighboringRelation,
    PrivacyConfig,
    SamplingMethod,
)
from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

from clients.flower_dp import declare_fixed_clipping, declare_local_dp, local_dp_noise_std
from fedpriv.audit.report_central import CLIP_ONLY, SERVER_NOISE
from strategies import audit_strategy
from tests import stock_client
from workflows.local_grid import LocalGrid

DELTA = 1e-5
ROUNDS = 3
CLIENTS = 4


def _pld_epsilon(noise_multiplier: float, count: int) -> float:
    accountant = pld.PLDAccountant()
    accountant.compose(dp_event.GaussianDpEvent(noise_multiplier), count)
    return accountant.get_epsilon(DELTA)


def _rdp_epsilon(noise_multiplier: float, count: int) -> float:
    accountant = rdp.RdpAccountant()
    accountant.compose(dp_event.GaussianDpEvent(noise_multiplier), count)
    return accountant.get_epsilon(DELTA)


def _run(strategy, client_app: ClientApp, tmp_path) -> dict:  # noqa: ANN001
    audited = audit_strategy(strategy, run_dir=tmp_path / "audit", num_clients=CLIENTS,
                             # not about attacks: the default attacks one client a round
                             audit={"delta": DELTA, "attacks": []}, input_shape=(1, 16, 16),
                             num_classes=10)
    audited.start(grid=LocalGrid(client_app, num_nodes=CLIENTS),
                  initial_arrays=ArrayRecord(stock_client.Net().state_dict()),
                  num_rounds=ROUNDS, train_config=ConfigRecord({"lr": 0.05}))
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["status"] == "completed" and report["rounds"] == ROUNDS
    return report


def _app(*mods) -> ClientApp:  # noqa: ANN002
    app = ClientApp(mods=list(mods))
    app.train()(stock_client.train)
    return app


def test_server_side_wrapper_with_flowers_accountant(tmp_path):
    """The issue's measurement: σ = 1, C = 1, 4 of 4 stock clients, 3 rounds, δ = 1e-5."""
    accountant = RdpAccountant(PrivacyConfig(
        target_delta=DELTA, population_size=CLIENTS,
        neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
        sampling_method=SamplingMethod.NO_AMPLIFICATION))
    strategy = DifferentialPrivacyServerSideFixedClipping(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.0), noise_multiplier=1.0,
        clipping_norm=1.0, num_sampled_clients=CLIENTS, accountant=accountant)
    report = _run(strategy, stock_client.app, tmp_path)
    central = report["central"]
    assert central["wrapper"] == "DifferentialPrivacyServerSideFixedClipping"
    assert (central["noise_multiplier"], central["clipping_norm"]) == (1.0, 1.0)
    assert central["sampling"] == "fixed-size: 4 of 4 clients without replacement"
    assert central["neighbouring"] == "add-remove one client" and central["releases"] == ROUNDS
    assert central["delta"] == DELTA and central["route"] == "pld"
    assert central["epsilon"] == pytest.approx(_pld_epsilon(1.0, ROUNDS), abs=1e-3)
    assert central["epsilon"] == pytest.approx(8.385, abs=2e-3)
    assert central["flower_epsilon"] == pytest.approx(accountant.get_epsilon(DELTA), rel=1e-12)
    assert central["flower_epsilon"] == pytest.approx(_rdp_epsilon(1.0, ROUNDS), rel=1e-9)
    assert central["flower_epsilon"] == pytest.approx(9.010, abs=1e-3)
    assert central["epsilon"] <= central["flower_epsilon"]
    assert central["against_server"]["reason"] == SERVER_NOISE
    assert len(report["clients"]) == CLIENTS
    for client in report["clients"]:
        assert float(client["epsilon"]) == math.inf and client["epsilon_reason"] == SERVER_NOISE
    html = (tmp_path / "audit" / "report.html").read_text()
    assert "Central differential privacy" in html and "DifferentialPrivacyServerSide" in html


def test_local_dp_mod_declared_and_accounted_against_the_server(tmp_path):
    """LocalDpMod(1, 1, 1, 1e-5): σ = √(2 ln 125000) ≈ 4.845; replace-one against the server
    (shift 2S): dp-accounting's GaussianDpEvent(σ/2), 3 rounds: ε ≈ 2.98 (PLD)."""
    sigma = local_dp_noise_std(1.0, 1.0, DELTA)
    report = _run(FedAvg(fraction_train=1.0, fraction_evaluate=0.0),
                  _app(declare_local_dp(LocalDpMod(1.0, 1.0, 1.0, DELTA))), tmp_path)
    assert report["central"] is None and not report["failures"]
    expected = _pld_epsilon(sigma / 2, ROUNDS)
    assert expected == pytest.approx(2.98, abs=0.01)
    for client in report["clients"]:
        assert client["mechanism"] == "client-gaussian"
        assert client["mechanism_params"]["noise_multiplier"] == pytest.approx(sigma)
        assert client["verification"]["status"] == "consistent"
        assert client["rounds_participated"] == ROUNDS
        assert client["epsilon"] <= expected + 1e-3  # fedpriv's tightest route
        assert client["epsilon"] == pytest.approx(expected, abs=0.02)
        assert client["warnings"] == [] and client["epsilon_reason"] is None
        assert client["flower_mod"]["mod"] == "LocalDpMod"


def test_local_dp_mod_with_sensitivity_below_the_clip_is_named(tmp_path):
    """Sensitivity 1e-4 with clip 1 (a public project's setting): σ ≈ 4.8e-4, ε ≥ 10⁵ against
    the server, and the report names both numbers."""
    report = _run(FedAvg(fraction_train=1.0, fraction_evaluate=0.0),
                  _app(declare_local_dp(LocalDpMod(1.0, 1e-4, 1.0, DELTA))), tmp_path)
    for client in report["clients"]:
        assert client["epsilon"] >= 1e5
        (warning,) = client["warnings"]
        assert "sensitivity 0.0001" in warning and "clipping_norm 1" in warning
        assert "noise multiplier 0.0004845" in warning


def test_client_side_wrapper_with_fixed_clipping_mod(tmp_path):
    """Client-side clipping (Flower's fixedclipping_mod, declared clip-only) with the server's
    noise: the central ε stands, each client's ε against the server is ∞ with the reason."""
    strategy = DifferentialPrivacyClientSideFixedClipping(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.0), noise_multiplier=1.0,
        clipping_norm=0.5, num_sampled_clients=CLIENTS)
    report = _run(strategy, _app(declare_fixed_clipping(fixedclipping_mod)), tmp_path)
    central = report["central"]
    assert central["clipping"] == "client" and central["flower_epsilon"] is None
    assert central["epsilon"] == pytest.approx(_pld_epsilon(1.0, ROUNDS), abs=1e-3)
    for client in report["clients"]:
        assert client["mechanism"] == "client-gaussian"
        assert client["verification"]["status"] == "consistent"
        assert float(client["epsilon"]) == math.inf and client["epsilon_reason"] == CLIP_ONLY


def test_wrapper_found_in_any_nesting_and_adaptive_sigma_recovered():
    """The wrapper is read wherever it sits in the chain; adaptive clipping's σ is the composite
    of the update's and the clipped-count bits' noise (Andrew et al. 2021), as Flower split it."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideAdaptiveClipping

    from strategies.auditing import AuditingStrategy
    from strategies.flower_dp import composite_noise, dp_wrapper

    fixed = DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.0, 1.0, 4)
    outer = AuditingStrategy(fixed, None, num_nodes=4, join_timeout=1.0)  # type: ignore[arg-type]
    assert dp_wrapper(outer) is fixed and dp_wrapper(FedAvg()) is None
    adaptive = DifferentialPrivacyServerSideAdaptiveClipping(
        FedAvg(), noise_multiplier=1.0, num_sampled_clients=4, clipped_count_stddev=2.0)
    assert adaptive.noise_multiplier > 1.0  # Flower's share for the update
    assert composite_noise(adaptive) == pytest.approx(1.0, rel=1e-12)
    assert composite_noise(fixed) == 1.0


def test_audited_strategy_inside_a_dp_wrapper_is_refused(tmp_path):
    from fedpriv.errors import InputError

    audited = audit_strategy(FedAvg(), run_dir=tmp_path / "audit", num_clients=CLIENTS)
    wrapper = DifferentialPrivacyServerSideFixedClipping(audited, 1.0, 1.0, CLIENTS)
    grid = LocalGrid(stock_client.app, num_nodes=CLIENTS)
    with pytest.raises(InputError, match="outermost"):
        wrapper.configure_train(1, ArrayRecord(stock_client.Net().state_dict()),
                                ConfigRecord(), grid)


def _round(rnd: int, **values) -> dict:  # noqa: ANN003
    flower_dp = {"wrapper": "DifferentialPrivacyServerSideFixedClipping", "noise": "server",
                 "clipping": "server", "adaptive": False, "noise_multiplier": 1.0,
                 "clipping_norm": 1.0, "num_sampled_clients": 3, "sampled": 3,
                 "population": 10, "aggregated": 3, "released": True, "flower": None, **values}
    return {"round": rnd, "metrics_json": json.dumps({"flower_dp": flower_dp})}


@pytest.mark.parametrize("neighbouring", ["add-remove", "replace-one"])
def test_central_block_samples_as_the_strategy_sampled(neighbouring):
    """3 of 10 clients a round, without replacement: add/remove, an added client displaces a
    sampled one (shift 2C at q = m/(N+1)); replace-one, the mixture pair at m/N, no larger than
    the 2C pair Poisson-sampled at m/N. A round with 2 of the 3 updates aggregated has σ·2/3 on
    the sum; a round that released nothing adds nothing."""
    from fedpriv.audit.report_central import central_block, round_metrics

    rounds = [_round(1), _round(2), _round(3, aggregated=2), _round(4, released=False)]
    block = central_block(round_metrics(rounds),
                          {"audit": {"delta": DELTA, "neighbouring": neighbouring}})
    assert block["releases"] == 3 and block["noise_multiplier_effective"] == pytest.approx(2 / 3)
    assert block["sampling"] == "fixed-size: 3 of 10 clients without replacement"
    q = 3 / 11 if neighbouring == "add-remove" else 3 / 10
    accountant = pld.PLDAccountant()
    for sigma, count in ((1.0, 2), (2 / 3, 1)):
        accountant.compose(dp_event.PoissonSampledDpEvent(
            q, dp_event.GaussianDpEvent(sigma / 2)), count)
    expected = accountant.get_epsilon(DELTA)
    if neighbouring == "add-remove":
        assert block["epsilon"] == pytest.approx(expected, rel=1e-2)
    else:
        assert 0 < block["epsilon"] <= expected * 1.01


def test_client_side_wrapper_without_verified_clipping_has_no_central_epsilon(tmp_path):
    """Flower's client-side wrapper trusts the clients to clip; stock clients do not declare it,
    so nothing bounds the sensitivity of the sum: the central ε is ∞, and the block says why."""
    strategy = DifferentialPrivacyClientSideFixedClipping(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.0), noise_multiplier=1.0,
        clipping_norm=0.5, num_sampled_clients=CLIENTS)
    central = _run(strategy, stock_client.app, tmp_path)["central"]
    assert float(central["epsilon"]) == math.inf
    assert central["reason"].startswith("client-side clipping not verified: round 1 aggregated 4")


def test_server_side_adaptive_wrapper_reports_its_composite_sigma(tmp_path):
    """Adaptive clipping end to end: the central ε is accounted at the composite σ the user
    asked for (here 1), with the clipping norm as of the last round."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideAdaptiveClipping

    strategy = DifferentialPrivacyServerSideAdaptiveClipping(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.0), noise_multiplier=1.0,
        num_sampled_clients=CLIENTS, clipped_count_stddev=2.0)
    central = _run(strategy, stock_client.app, tmp_path)["central"]
    assert central["adaptive"] and central["clipping"] == "server"
    assert central["noise_multiplier"] == pytest.approx(1.0, rel=1e-12)
    assert central["clipping_norm"] == pytest.approx(strategy.clipping_norm)
    assert central["epsilon"] == pytest.approx(_pld_epsilon(1.0, ROUNDS), abs=1e-3)
