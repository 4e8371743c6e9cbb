"""A client's batches and noise are its secret (docs/trust.md §4): fedpriv's ClientApp draws
them from operating-system entropy unless its own side opts in to the run seed's stream
(:func:`fedpriv.seeding.client_noise_seed`), which the server sends and can re-draw.

Without the opt-in — a deployment's node config, ``partition-id`` and ``num-partitions`` alone —
two clients of the same run seed, partition and round release different noise, the reply
declares no ``noise-stream``, and the server's re-draw from the run seed refutes a client that
claims it anyway. With the opt-in (what ``fedpriv simulate`` and :class:`LocalGrid` set) the
release is reproducible and declared, and the committed-noise check applies
(tests/test_verification_committed.py, tests/test_sensitivity_cheats.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from reliability_support import QUICKSTART, client_app_with, verdict_leaf

from fedpriv.protocol import CONFIG_KEY, PROTOCOL_KEY, PROTOCOL_VERSION, REPORT_RECORD
from fedpriv.seeding import (
    REPRODUCIBLE_NOISE_ENV,
    REPRODUCIBLE_NOISE_KEY,
    SEEDED_NOISE,
    client_noise_seed,
)
from workflows.local_grid import LocalGrid

SETTINGS = ["data.num_clients=2", "train.local_steps=2", "audit.ground_truth=true"]
DEPLOYED = {"partition-id": 0, "num-partitions": 2}  # what a SuperNode's --node-config gives


@pytest.fixture(autouse=True)
def _no_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's environment does not opt in (as a deployment's SuperNode)."""
    monkeypatch.delenv(REPRODUCIBLE_NOISE_ENV, raising=False)


def _train(node_config: dict, *overrides: str) -> tuple[list[np.ndarray], ConfigRecord]:
    """One round-1 train message of the quickstart to fedpriv's ClientApp on a fresh node:
    the reply's parameters and its report."""
    from clients.client_app import train
    from clients.local_data import client_data
    from fedpriv.models import build_model
    from workflows.config import load_config

    LocalGrid(train, 1)  # Flower's task identity, for Message()
    cfg = load_config(QUICKSTART, [*SETTINGS, *overrides])
    shape = tuple(client_data(cfg.data, cfg.seed, 0, 2)[0].shape[1:])
    torch.manual_seed(0)  # the same global model in every message
    arrays = ArrayRecord(build_model(cfg.model.name, shape).state_dict())
    config = ConfigRecord({CONFIG_KEY: cfg.to_json(), PROTOCOL_KEY: PROTOCOL_VERSION,
                           "server-round": 1})
    msg = Message(RecordDict({"arrays": arrays, "config": config}), dst_node_id=1000,
                  message_type=MessageType.TRAIN)
    context = Context(run_id=1, node_id=1000, state=RecordDict(), run_config={},
                      node_config=node_config)
    reply = train(msg, context)
    return reply.content["arrays"].to_numpy_ndarrays(), reply.content[REPORT_RECORD]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("mechanism", [(), ("mechanism.name='client-gaussian'",)],
                         ids=["record-level", "client-level"])
def test_without_the_opt_in_the_noise_is_fresh_and_undeclared(mechanism: tuple) -> None:
    first, report = _train(DEPLOYED, *mechanism)
    second, second_report = _train(DEPLOYED, *mechanism)
    seeded, seeded_report = _train({**DEPLOYED, REPRODUCIBLE_NOISE_KEY: True}, *mechanism)
    again, again_report = _train({**DEPLOYED, REPRODUCIBLE_NOISE_KEY: True}, *mechanism)
    assert not _same(first, second)  # same run seed, partition and round: other noise
    assert not _same(first, seeded)  # not what the run seed's stream draws
    assert "record-ids" in report and "noise-stream" not in report
    assert _same(seeded, again) and seeded_report["noise-stream"] == SEEDED_NOISE
    # the batches are secret too (the oracle's record ids): other records in each secret run,
    # neither the seeded stream's, which draws the same ones again
    batches = [json.loads(r["record-ids"])
               for r in (report, second_report, seeded_report, again_report)]
    assert batches[0] != batches[1] and batches[2] not in batches[:2]
    assert batches[2] == batches[3]


def test_the_simulators_switch_opts_in_and_the_node_config_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert client_noise_seed(7, DEPLOYED) is None
    assert client_noise_seed(7, DEPLOYED, {REPRODUCIBLE_NOISE_ENV: ""}) is None  # exported empty
    monkeypatch.setenv(REPRODUCIBLE_NOISE_ENV, "1")
    assert client_noise_seed(7, DEPLOYED) == 7
    assert client_noise_seed(7, {**DEPLOYED, REPRODUCIBLE_NOISE_KEY: False}) is None
    seeded, _ = _train(DEPLOYED)
    assert _same(seeded, _train({**DEPLOYED, REPRODUCIBLE_NOISE_KEY: True})[0])


def test_an_adversarys_own_noise_follows_the_honest_clients_choice() -> None:
    """``reuse-noise`` and its kind draw from :attr:`Turn.noise_seed`: the run seed where the
    node opts in, else a secret of the node's, the same in every round of that node."""
    from clients.adversaries.base import Turn
    from workflows.config import load_config

    cfg = load_config(QUICKSTART, ["seed=5"])

    def turn(node_config: dict, state: RecordDict, rnd: int) -> Turn:
        context = Context(run_id=1, node_id=1000, state=state, run_config={},
                          node_config=node_config)
        return Turn(None, context, cfg, 0, rnd, None)  # type: ignore[arg-type]

    node, other = RecordDict(), RecordDict()
    secret = turn(DEPLOYED, node, 1).noise_seed
    assert turn(DEPLOYED, node, 2).noise_seed == secret != turn(DEPLOYED, other, 1).noise_seed
    assert turn({**DEPLOYED, REPRODUCIBLE_NOISE_KEY: True}, RecordDict(), 1).noise_seed == 5


def test_an_opt_in_is_a_warning_once_per_process_and_source(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An exported variable opts a hand-started SuperNode's clients in silently otherwise."""
    from fedpriv import seeding

    seeding._opted_in.cache_clear()
    with caplog.at_level(logging.WARNING, logger="fedpriv.seeding"):
        for _ in range(3):
            client_noise_seed(7, DEPLOYED, {REPRODUCIBLE_NOISE_ENV: "0"})
            client_noise_seed(7, DEPLOYED, {REPRODUCIBLE_NOISE_ENV: "1"})
            client_noise_seed(7, {REPRODUCIBLE_NOISE_KEY: True}, {})
    said = [r.getMessage() for r in caplog.records if r.name == "fedpriv.seeding"]
    assert [m.split(":")[0] for m in said] == [f"environment {REPRODUCIBLE_NOISE_ENV}=1",
                                               f"node config {REPRODUCIBLE_NOISE_KEY} = true"]
    assert all("the server knows" in m for m in said)


@pytest.mark.parametrize(("node", "env", "message"), [
    ({REPRODUCIBLE_NOISE_KEY: "yes"}, "0",
     "node config fedpriv-reproducible-noise: expected true or false, got 'yes'"),
    ({}, "true", "environment variable FEDPRIV_REPRODUCIBLE_NOISE: expected 0 or 1, got 'true'"),
])
def test_a_malformed_switch_is_one_line_naming_it(node: dict, env: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        client_noise_seed(7, node, {REPRODUCIBLE_NOISE_ENV: env})
    assert str(caught.value) == message


def test_the_servers_redraw_refutes_a_secret_client_claiming_the_run_seeds_stream(
    tmp_path: Path,
) -> None:
    """Secret noise (LocalGrid without the opt-in): client 0 claims the seeded stream and the
    committed-noise re-draw refutes it; client 1 claims nothing and the statistical replay
    stands alone (no committed-noise check, no alarm)."""
    from fedpriv.audit import AuditStore
    from strategies.server_run import run_federation
    from workflows.config import load_config

    def claim(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        if context.node_config["partition-id"] == 0 and not reply.has_error():
            reply.content[REPORT_RECORD]["noise-stream"] = SEEDED_NOISE
        return reply

    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=2", "train.local_steps=1",
                                   "audit.ground_truth=true", "audit.attacks=[]"])
    grid = LocalGrid(client_app_with(claim), 2, reproducible_noise=False)
    logging.disable(logging.WARNING)
    try:
        report = run_federation(grid, cfg, tmp_path / "run")
    finally:
        logging.disable(logging.NOTSET)
    assert report["status"] == "completed"
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        rows = store.query("SELECT client_id, verification_json FROM tallies "
                           "WHERE verification_json IS NOT NULL")
    verdicts = {r["client_id"]: json.loads(r["verification_json"]) for r in rows}
    assert verdict_leaf(verdicts[0], "committed-noise")["status"] == "inconsistent"
    assert verdicts[1]["status"] != "inconsistent"
    assert verdict_leaf(verdicts[1], "committed-noise") is None
