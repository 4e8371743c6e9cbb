"""Adversarial clients (configs/adversaries.toml) against the auditor, end to end in process.

Every adversary is marked inconsistent or has its replies recorded as failures with a reason;
every honest client is verified; and the honest clients' ε, log C and the accuracy series are
exactly those of the same run in which the adversaries' replies never reach aggregation
(they raise instead) — under FedAvg and under Krum.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from label_support import assert_labelled_by_tests
from reliability_support import LocalGrid, faulty_client_app

from clients.client_app import app as client_app
from fedpriv.audit import AuditStore
from strategies.server_run import run_federation
from workflows.config import load_config

ADVERSARIES = Path(__file__).resolve().parents[1] / "configs" / "adversaries.toml"
HONEST = (0, 1, 2, 3)
ROUNDS = 3


def _run(tmp_path: Path, name: str, overrides: list[str], app) -> dict:  # noqa: ANN001
    cfg = load_config(ADVERSARIES, [f"rounds={ROUNDS}", *overrides])  # the preset runs 10
    return run_federation(LocalGrid(app, cfg.data.num_clients), cfg, tmp_path / name)


def _without_adversaries() -> object:
    """The adversaries' replies never aggregated: they raise (client 9, the replayer, sends
    an honest first round, which the auditor accepts in the adversarial run too)."""
    plan = {(c, r): "raise" for c in (4, 5, 6, 7, 8) for r in range(1, ROUNDS + 1)}
    plan.update({(9, r): "raise" for r in range(2, ROUNDS + 1)})
    return faulty_client_app(plan)


@pytest.fixture(scope="module", params=["fedavg", "krum"])
def runs(request, tmp_path_factory):  # noqa: ANN001, ANN201
    tmp = tmp_path_factory.mktemp(request.param)
    strategy = [f"strategy.name={request.param}"]
    attacked = _run(tmp, "adversarial", strategy, client_app)
    honest_only = _run(tmp, "reference", [*strategy, "adversary=[]"], _without_adversaries())
    return attacked, honest_only, tmp


def _clients(report: dict) -> dict[int, dict]:
    return {c["client_id"]: c for c in report["clients"]}


def test_every_adversary_is_caught_with_a_reason(runs):  # noqa: ANN001
    attacked, _, _ = runs
    assert attacked["status"] == "completed"
    clients = _clients(attacked)
    failures = {}
    for f in attacked["failures"]:
        failures.setdefault(f["client_id"], []).append(f)
    for cid in (4, 5, 7, 9):  # under-noise, no-noise, scale-update, replay
        assert clients[cid]["verification"]["status"] == "inconsistent", cid
        assert clients[cid]["guarantee"] == "unbounded" and math.isinf(clients[cid]["epsilon"])
        assert clients[cid]["epsilon_declared"] < 10  # the declared value is kept beside
        assert all(f["kind"] == "inconsistent" and f["message"] for f in failures[cid])
    assert "replay" in failures[9][0]["message"] or "repeats" in failures[9][0]["message"]
    for cid, words in ((6, "sample-rate"), (8, "mechanism-params")):  # refused at the boundary
        assert len(failures[cid]) == ROUNDS
        assert all(f["kind"] == "malformed" and words in f["message"] for f in failures[cid])


def test_honest_clients_are_verified_and_unaffected(runs):  # noqa: ANN001
    attacked, reference, _ = runs
    mine, theirs = _clients(attacked), _clients(reference)
    for cid in HONEST:
        assert_labelled_by_tests(mine[cid])
        assert mine[cid]["verification"]["status"] == "consistent"
        for key in ("epsilon", "log_bayes_capacity", "rounds_participated"):
            assert mine[cid][key] == theirs[cid][key], (cid, key)
    assert attacked["accuracy"] == reference["accuracy"]
    assert attacked["loss"] == reference["loss"]


def test_no_record_id_leaves_a_client_by_default(runs):  # noqa: ANN001
    attacked, _, tmp = runs
    assert attacked["oracle"]["ground_truth"] is False
    with AuditStore.open(tmp / "adversarial", readonly=True) as store:
        assert store.query("SELECT count(*) AS n FROM ground_truth")[0]["n"] == 0


MIXED = Path(__file__).resolve().parents[1] / "configs" / "mixed-mechanisms.toml"


def _honest_verdicts(tmp_path: Path, rounds: int) -> list[str]:
    cfg = load_config(MIXED, [f"rounds={rounds}"])
    report = run_federation(LocalGrid(client_app, cfg.data.num_clients), cfg, tmp_path / "run")
    return [r["verification"]["status"] for c in report["clients"] for r in c["per_round"]]


def test_honest_clients_of_every_mechanism_are_never_inconsistent(tmp_path: Path) -> None:
    statuses = _honest_verdicts(tmp_path, 3)
    assert len(statuses) == 30 and "inconsistent" not in statuses
    assert statuses.count("unverifiable") == 6  # none (2 clients x 3 rounds): nothing claimed


@pytest.mark.slow
def test_two_hundred_honest_client_rounds_without_a_false_alarm(tmp_path: Path) -> None:
    statuses = _honest_verdicts(tmp_path, 20)
    assert len(statuses) == 200 and "inconsistent" not in statuses
