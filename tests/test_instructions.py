"""``fedpriv.instructions``: one derivation of a client's settings from the run's config, the
comparison with a reply, and the size check (issue 25, item 2)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fedpriv.config import load_config
from fedpriv.instructions import (
    client_mechanism,
    instructed_report,
    settings_differences,
    settings_verdict,
    size_verdict,
)
from fedpriv.mechanisms import build_mechanism
from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.protocol import ClientReport
from fedpriv.verification import Verdict, with_preconditions

OVERRIDE = "mechanism.overrides=[{clients=[1],name='vmf',kappa=1000.0}]"


@pytest.fixture(scope="module")
def cfg():  # noqa: ANN201
    return load_config(None, ["train.lr=0.5", "train.local_steps=3", "train.batch_size=8",
                              "train.weight_decay=0.01", OVERRIDE])


def test_the_report_follows_the_config_and_the_overrides(cfg) -> None:  # noqa: ANN001
    report = instructed_report(cfg, 1, 4, 100)
    assert (report.partition_id, report.server_round, report.local_examples) == (1, 4, 100)
    assert (report.local_steps, report.lr, report.batch_size) == (3, 0.5, 8.0)
    assert report.sample_rate == 8 / 100 and report.sampling == cfg.train.sampling
    assert report.mechanism == build_mechanism("vmf", {"kappa": 1000.0})
    assert report.optimizer == OptimizerSettings("sgd", 0.0, False, 0.01)
    assert instructed_report(cfg, 0, 4, 5).sample_rate == 1.0  # min(L, n)/n
    # the report survives the wire exactly: an honest reply differs in nothing
    wire = ClientReport.from_config(report.to_config())
    assert settings_differences(report, wire) == []
    assert settings_verdict(report, wire).status == "consistent"


def test_a_node_config_pin_wins_on_the_client(cfg) -> None:  # noqa: ANN001
    pinned = client_mechanism(cfg, 0, {"mechanism": "laplace", "laplace-scale": 2.0})
    assert pinned == build_mechanism("laplace", {"laplace_scale": 2.0})
    assert client_mechanism(cfg, 0, {}) == client_mechanism(cfg, 0)


@pytest.mark.parametrize(("change", "field", "sent", "declared"), [
    ({"lr": 0.05}, "lr", 0.5, 0.05),
    ({"local_steps": 1}, "steps", 3, 1),
    ({"batch_size": 16.0}, "batch-size", 8.0, 16.0),
    ({"sampling": "fixed"}, "sampling", "poisson", "fixed"),
    ({"server_round": 3}, "server-round", 4, 3),
    ({"optimizer": OptimizerSettings("adam", 0.0, False, 0.01)}, "optimizer", "sgd", "adam"),
    ({"optimizer": OptimizerSettings("sgd", 0.0, False, 0.0)}, "weight-decay", 0.01, 0.0),
    ({"optimizer": OptimizerSettings("sgd", 0.9, True, 0.01)}, "momentum", 0.0, 0.9),
    ({"epsilon_budget": 8.0}, "epsilon-budget", None, 8.0),
])
def test_each_differing_setting_is_named_sent_vs_declared(
    cfg, change: dict, field: str, sent: object, declared: object,  # noqa: ANN001
) -> None:
    expected = instructed_report(cfg, 0, 4, 100)
    lie = replace(expected, **change)
    diffs = settings_differences(expected, lie)
    assert (field, sent, declared) in diffs
    verdict = settings_verdict(expected, lie)
    assert verdict.status == "inconsistent" and verdict.p_value == 0.0
    assert f"{field}: sent {sent!r}, declared {declared!r}" in verdict.reason


def test_a_mechanism_lie_names_the_parameter_or_the_name(cfg) -> None:  # noqa: ANN001
    expected = instructed_report(cfg, 0, 4, 100)
    sigma = replace(expected, mechanism=build_mechanism("gaussian", {"noise_multiplier": 2.0}))
    assert settings_differences(expected, sigma) == [
        ("mechanism-params.noise_multiplier", 1.0, 2.0)]
    other = replace(expected, mechanism=build_mechanism("vmf", {"kappa": 1000.0}))
    assert settings_differences(expected, other) == [("mechanism", "gaussian", "vmf")]


def test_the_size_is_checked_only_where_the_server_knows_it(cfg) -> None:  # noqa: ANN001
    report = instructed_report(cfg, 0, 4, 100)
    assert size_verdict(100, report, "x").status == "consistent"
    wrong = size_verdict(99, report, "the simulation engine")
    assert wrong.status == "inconsistent" and "gives 99 records" in wrong.reason
    assert size_verdict(None, report, "x").status == "unverifiable"


def test_a_precondition_refutes_but_never_verifies() -> None:
    tested = Verdict("client-round", "unverifiable", "adam hides the release",
                     parts=(Verdict("declaration", "consistent", "possible", p_value=1.0),))
    known = [Verdict("settings", "consistent", "ok", p_value=1.0),
             Verdict("identity", "unverifiable", "first claim")]
    kept = with_preconditions(tested, known)
    assert kept.status == "unverifiable" and kept.reason == tested.reason
    assert [p.test for p in kept.parts] == ["settings", "identity", "declaration"]
    bad = with_preconditions(tested, [Verdict("settings", "inconsistent", "lr", p_value=0.0)])
    assert bad.status == "inconsistent" and bad.p_value == 0.0
    assert bad.reason == "settings: lr"
    single = with_preconditions(Verdict("replay", "inconsistent", "repeats round 1", p_value=0.0),
                                known)
    assert single.status == "inconsistent" and single.parts[-1].test == "replay"
    assert math.isclose(single.p_value, 0.0)
