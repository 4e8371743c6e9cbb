"""Bad reply fields are one client's recorded failure, never the run's end (issue: a reply with
an unknown mechanism, a negative σ, zero or negative steps, a record id out of range or a
partition id already used this round used to abort the whole federation)."""

from __future__ import annotations

import json

import pytest
from flwr.app import Context, Message, MessageType
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, LocalGrid

from fedpriv.config import load_config
from strategies.federation import run_federation

SMALL = ["rounds=2", "data.num_clients=8", "train.local_steps=1", "train.batch_size=8",
         "audit.ground_truth=true"]  # fmt: skip


def _params(report, **changes):  # noqa: ANN001, ANN202
    params = json.loads(report["mechanism-params"])
    return json.dumps({**params, **changes})


# partition id -> (what the report says instead, the words the failure must carry)
LIES = {
    1: (lambda r: r.__setitem__("mechanism", "foo"), "mechanism"),
    2: (lambda r: r.__setitem__("mechanism-params", _params(r, noise_multiplier=-3)),
        "noise_multiplier"),
    3: (lambda r: r.__setitem__("steps", 0), "steps"),
    4: (lambda r: r.__setitem__("steps", -5), "steps"),
    5: (lambda r: r.__setitem__("record-ids", json.dumps([[10**9]])), "record ids"),
    7: (lambda r: r.__setitem__("partition-id", 6), "already replied"),  # after client 6
}  # fmt: skip


def _lying_app() -> ClientApp:
    from clients.client_app import evaluate, train

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        pid = int(context.node_config["partition-id"])
        if msg.metadata.message_type == MessageType.TRAIN and pid in LIES:
            LIES[pid][0](reply.content["meta"])
        return reply

    app = ClientApp(mods=[mod])
    app.train()(train)
    app.evaluate()(evaluate)
    return app


@pytest.fixture(scope="module")
def report(tmp_path_factory):  # noqa: ANN001, ANN201
    cfg = load_config(QUICKSTART, SMALL)
    run_dir = tmp_path_factory.mktemp("lies") / "run"
    return run_federation(LocalGrid(_lying_app(), 8), cfg, run_dir)


def test_the_run_completes(report) -> None:  # noqa: ANN001
    assert report["status"] == "completed" and report["error"] is None
    assert report["rounds"] == 2 and len(report["accuracy"]) == 2


@pytest.mark.parametrize("pid", sorted(LIES))
def test_each_lie_is_a_failure_with_its_reason(report, pid) -> None:  # noqa: ANN001
    node = str(1000 + pid)
    mine = [f for f in report["failures"] if f["node_id"] == node]
    assert len(mine) == 2, mine  # both rounds
    words = LIES[pid][1]
    assert all(words in f["message"] for f in mine), mine
    assert all(f["kind"] in ("malformed", "identity") for f in mine)


def test_honest_clients_are_tallied(report) -> None:  # noqa: ANN001
    honest = {c["client_id"]: c for c in report["clients"]}
    for pid in (0, 6):
        assert honest[pid]["rounds_participated"] == 2
        assert honest[pid]["verification"]["status"] == "consistent"
