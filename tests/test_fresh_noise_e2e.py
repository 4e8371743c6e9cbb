"""Fresh noise through the real server (issue 25 item 4): a client that replays its first
update perturbed by 1%, and one that sends its first update negated (z then −z: the server's
sum would see its noise cancel), are caught from round 2 on — not aggregated, ε unbounded —
while honest clients pass the fresh-noise test in every round."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Context, Message, MessageType
from flwr.clientapp import ClientApp
from label_support import assert_labelled_by_tests
from reliability_support import QUICKSTART, LocalGrid, client_app_with

from strategies.server_run import run_federation
from workflows.config import load_config

CHEATS = {1: "perturbed-replay", 2: "negated"}


def _cheating_app() -> ClientApp:

    first: dict[int, dict[str, np.ndarray]] = {}
    rng = np.random.default_rng(0)

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        pid = int(context.node_config["partition-id"])
        if msg.metadata.message_type != MessageType.TRAIN or pid not in CHEATS:
            return reply
        theta = {k: v.numpy() for k, v in msg.content["arrays"].items()}
        sent = {k: v.numpy() for k, v in reply.content["arrays"].items()}
        if pid not in first:
            first[pid] = {k: sent[k] - theta[k] for k in sent}
            return reply
        out = {}
        for k, delta in first[pid].items():
            if CHEATS[pid] == "negated":
                out[k] = theta[k] - delta
            else:
                scale = 0.01 * np.abs(delta).mean()
                out[k] = theta[k] + delta + scale * rng.standard_normal(delta.shape)
            out[k] = out[k].astype(sent[k].dtype)
        reply.content["arrays"] = ArrayRecord({k: Array(v) for k, v in out.items()})
        return reply

    return client_app_with(mod)


@pytest.fixture(scope="module")
def report(tmp_path_factory):  # noqa: ANN001, ANN201
    # audit.attacks=[]: not about attacks (the default attacks one client a round)
    cfg = load_config(QUICKSTART, ["rounds=3", "data.num_clients=3", "train.local_steps=1",
                                   "audit.attacks=[]"])
    return run_federation(LocalGrid(_cheating_app(), 3), cfg,
                          tmp_path_factory.mktemp("fresh") / "run")


def test_replays_and_cancellation_are_caught(report) -> None:  # noqa: ANN001
    clients = {c["client_id"]: c for c in report["clients"]}
    failures = {(f["round"], f["client_id"]) for f in report["failures"]
                if f["kind"] == "inconsistent"}
    for pid in CHEATS:
        assert {(2, pid), (3, pid)} <= failures
        assert clients[pid]["guarantee"] == "unbounded"
        assert clients[pid]["properties"]["fresh-noise"]["status"] == "failed"


def test_honest_client_passes_fresh_noise_every_round(report) -> None:  # noqa: ANN001
    honest = next(c for c in report["clients"] if c["client_id"] == 0)
    assert honest["properties"]["fresh-noise"]["rounds"]["passed"] == 3
    assert_labelled_by_tests(honest)
