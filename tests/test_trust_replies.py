"""Bad reply fields are one client's recorded failure, never the run's end (issue: a reply with
an unknown mechanism, a negative σ, zero or negative steps, a record id out of range or a
partition id already used this round used to abort the whole federation)."""

from __future__ import annotations

import json

import pytest
from flwr.app import Context, Message, MessageType
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, LocalGrid, client_app_with

from strategies.server_run import run_federation
from workflows.config import load_config

NO_ATTACKS = "audit.attacks=[]"  # not about attacks: the default attacks one client a round
SMALL = ["rounds=2", "data.num_clients=8", "train.local_steps=1", "train.batch_size=8",
         "audit.ground_truth=true", NO_ATTACKS]  # fmt: skip


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
    5: (lambda r: r.__setitem__("record-ids", json.dumps([[10**9]])), "'record-ids': outside"),
    7: (lambda r: r.__setitem__("partition-id", 6), "is client 7, but claims client 6"),
}  # fmt: skip


def _lying_app() -> ClientApp:

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        pid = int(context.node_config["partition-id"])
        if msg.metadata.message_type == MessageType.TRAIN and pid in LIES:
            LIES[pid][0](reply.content["meta"])
        return reply

    return client_app_with(mod)


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


class _LossyGrid(LocalGrid):
    """Round 2: node 1002 never answers; node 1003's reply is an error made by the SuperLink
    (source: the SuperLink's own id 1, as Flower reports a lost node)."""

    def send_and_receive(self, messages, *, timeout=None):  # noqa: ANN001, ANN201
        from flwr.app import Error

        replies = super().send_and_receive(messages, timeout=timeout)
        if {int(m.content["config"]["server-round"]) for m in messages} != {2}:
            return replies
        out = []
        for msg, reply in zip(sorted(messages, key=lambda m: m.metadata.dst_node_id), replies,
                              strict=True):
            if msg.metadata.dst_node_id == 1002:
                continue
            if msg.metadata.dst_node_id == 1003:
                reply = Message(Error(code=0, reason="Node unavailable"), reply_to=msg)
                reply.metadata.__dict__["_src_node_id"] = 1  # the SuperLink's id
            out.append(reply)
        return out


def test_silent_and_lost_nodes_are_failures_of_the_right_client(tmp_path) -> None:  # noqa: ANN001
    from clients.client_app import app

    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=4", "train.local_steps=1",
                                   NO_ATTACKS])
    report = run_federation(_LossyGrid(app, 4), cfg, tmp_path / "run")
    failures = {(f["round"], f["client_id"]): f for f in report["failures"]}
    assert failures[(2, 2)]["kind"] == "timeout" and failures[(2, 2)]["node_id"] == "1002"
    assert failures[(2, 3)]["kind"] == "exception" and failures[(2, 3)]["node_id"] == "1003"
    assert report["status"] == "completed"
