"""Steps mode through the real server and ClientApp, in process: an honest client verified with
every step tested, an under-noiser (× 0.3 at 20 local steps), a client whose steps do not
compose to its update, and a client whose step releases' record is malformed — each one
client's outcome, the run completed and the honest update aggregated; the attack on the honest
client (with the ground-truth oracle, so each step's batch size is declared too) sees its first
step alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Context, Message, MessageType
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, LocalGrid

from fedpriv.protocol import STEPS_RECORD
from strategies.server_run import run_federation
from workflows.config import load_config

HONEST, UNDER, TAMPERED, MALFORMED = 0, 1, 2, 3
ROUNDS = 2


def _edit(record: ArrayRecord, change) -> ArrayRecord:  # noqa: ANN001
    arrays = {k: v.numpy().copy() for k, v in record.items()}
    return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in change(arrays).items()})


def _halve_step_5(arrays: dict) -> dict:  # noqa: ANN001
    for value in arrays.values():
        value[4] *= 0.5
    return arrays


def _drop_last_step(arrays: dict) -> dict:  # noqa: ANN001
    return {k: v[:-1] for k, v in arrays.items()}


def _app() -> ClientApp:
    from clients.adversaries import adversary_mod
    from clients.client_app import evaluate, train

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        pid = int(context.node_config["partition-id"])
        if msg.metadata.message_type == MessageType.TRAIN and pid in (TAMPERED, MALFORMED):
            change = _halve_step_5 if pid == TAMPERED else _drop_last_step
            reply.content[STEPS_RECORD] = _edit(reply.content[STEPS_RECORD], change)
        return reply

    app = ClientApp(mods=[mod, adversary_mod])
    app.train()(train)
    app.evaluate()(evaluate)
    return app


@pytest.fixture(scope="module")
def report(tmp_path_factory):  # noqa: ANN001, ANN201
    tmp = tmp_path_factory.mktemp("steps")
    preset = tmp / "steps.toml"
    preset.write_text(QUICKSTART.read_text() + (
        f'\nrelease = "steps"\n\n[[adversary]]\nclients = [{UNDER}]\n'
        'behaviour = "under-noise"\nfactor = 0.3\n'))
    cfg = load_config(preset, [f"rounds={ROUNDS}", "data.num_clients=4",
                               'audit.attacks=["iga"]', "audit.iterations=3",
                               f"audit.clients=[{HONEST}]", "audit.every=1",
                               "audit.ground_truth=true",
                               "audit.game_trials=0"])
    assert cfg.train.local_steps == 20 and cfg.audit.release == "steps"
    return run_federation(LocalGrid(_app(), 4), cfg, Path(tmp) / "run") | {"dir": tmp / "run"}


def _clients(report: dict) -> dict[int, dict]:
    return {c["client_id"]: c for c in report["clients"]}


def _failures(report: dict, cid: int) -> list[dict]:
    return [f for f in report["failures"] if f["client_id"] == cid]


def test_the_run_completes(report) -> None:  # noqa: ANN001
    assert report["status"] == "completed" and report["error"] is None
    assert len(report["accuracy"]) == ROUNDS
    # the step releases never reach Flower's aggregation (it would refuse two ArrayRecords)
    assert not [f for f in report["failures"] if f["client_id"] is None], report["failures"]


def test_the_honest_client_is_verified_with_every_step_tested(report) -> None:  # noqa: ANN001
    honest = _clients(report)[HONEST]
    assert honest["verification"]["status"] == "consistent", honest["verification"]
    parts = {p["test"]: p for p in honest["verification"]["parts"]}
    assert parts["composition"]["status"] == "consistent"
    assert parts["steps"]["status"] == "consistent"
    assert parts["steps"]["reason"].startswith("20 of 20 steps consistent; step 1: ")
    assert not _failures(report, HONEST)


def test_the_under_noiser_is_caught(report) -> None:  # noqa: ANN001
    mine = _failures(report, UNDER)
    assert len(mine) == ROUNDS and all(f["kind"] == "inconsistent" for f in mine), mine
    assert all("step" in f["message"] for f in mine)


def test_steps_that_do_not_compose_are_inconsistent(report) -> None:  # noqa: ANN001
    mine = _failures(report, TAMPERED)
    assert len(mine) == ROUNDS and all(f["kind"] == "inconsistent" for f in mine), mine
    # the verdict's parts, not the failure line: that is cut to MAX_FAILURE characters, and
    # the replay's checks (sensitivity, committed-noise, sensitivity-rounds) come first in it
    failed = [{p["test"] for p in r["verification"]["parts"] if p["status"] == "inconsistent"}
              for r in _clients(report)[TAMPERED]["per_round"]]
    assert len(failed) == ROUNDS and all("composition" in f for f in failed), failed


def test_a_malformed_steps_record_is_a_malformed_failure(report) -> None:  # noqa: ANN001
    mine = _failures(report, MALFORMED)
    assert len(mine) == ROUNDS and all(f["kind"] == "malformed" for f in mine), mine
    assert all(STEPS_RECORD in f["message"] for f in mine)


def test_the_attack_sees_one_step_not_a_pseudo_gradient(report) -> None:  # noqa: ANN001
    from fedpriv.audit import AuditStore

    with AuditStore.open(report["dir"]) as store:
        rows = store.query("SELECT client_id, pseudo_gradient FROM attacks")
    assert len(rows) == ROUNDS and all(r["client_id"] == HONEST for r in rows), rows
    assert all(r["pseudo_gradient"] == 0 for r in rows)  # 20 local steps, attacked as one
