"""No single reply can end, stall or veto a run (issue 25, item 1): each kind of hostile reply is
sent through the real server code (:func:`strategies.server_run.run_federation` on an in-process
:class:`~reliability_support.LocalGrid`), and the run completes with every other client's update
aggregated and the hostile one recorded with its client id and kind.

Before: a declaration the PLD accountant cannot account (100,000 local steps, a Laplace scale
below its PLD's range, a client-level σ whose accounted σ/2 is below the Gaussian PLD's range)
ended the run with an InputError blaming the user's config (or an OverflowError), and a
declared learning rate of 1e-300 ended it in the verification (the update over lr overflows); an
extra or a missing metric key,
renamed array keys or renamed records made Flower's FedAvg refuse every round ("All
MetricRecords/ArrayRecords must have the same keys"), so the model never moved for anyone.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, Context, Message, MessageType, MetricRecord
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, LocalGrid, client_app_with

from fedpriv.audit import AuditStore
from fedpriv.mechanisms import build_mechanism
from strategies.server_run import run_federation
from workflows.config import load_config

NUM_CLIENTS = 19
# audit.attacks = []: not about attacks (the default attacks one client a round)
SMALL = ["rounds=2", f"data.num_clients={NUM_CLIENTS}", "train.local_steps=1",
         "train.batch_size=8", "audit.accountant=pld", "audit.attacks=[]"]  # fmt: skip
HONEST = (0, 18)


def _meta(**changes):  # noqa: ANN003, ANN202
    def change(reply: Message) -> None:
        for key, value in changes.items():
            reply.content["meta"][key] = value
    return change


def _arrays(transform):  # noqa: ANN001, ANN202
    def change(reply: Message) -> None:
        arrays = {k: v.numpy() for k, v in reply.content["arrays"].items()}
        reply.content["arrays"] = ArrayRecord({k: Array(np.ascontiguousarray(v))
                                               for k, v in transform(arrays).items()})
    return change


def _metrics(transform):  # noqa: ANN001, ANN202
    def change(reply: Message) -> None:
        reply.content["metrics"] = MetricRecord(transform(dict(reply.content["metrics"])))
    return change


def _renamed_records(reply: Message) -> None:
    content = reply.content
    arrays, metrics = content["arrays"], content["metrics"]
    del content["arrays"], content["metrics"]
    content["weights"], content["train-metrics"] = arrays, metrics


def _nan(arrays: dict) -> dict:
    first = next(iter(arrays))
    arrays[first] = arrays[first].copy()
    arrays[first].flat[0] = np.nan
    return arrays


def _tiny_batch(reply: Message) -> None:
    meta = reply.content["meta"]
    meta["batch-size"] = 1e-300
    meta["sample-rate"] = 1e-300 / meta["local-examples"]


# partition id -> (what the reply says instead, the failure kind (None: aggregated), words)
HOSTILE = {
    1: (_meta(**{"mechanism-params": json.dumps({"clip": 1.0, "noise_multiplier": 1e-300})}),
        "malformed", "noise_multiplier"),
    2: (_meta(steps=100_000,
              **{"mechanism-params": json.dumps({"clip": 1.0, "noise_multiplier": 1e-4})}),
        "unaccountable", "100,000 gaussian release(s)"),
    3: (_meta(mechanism="laplace",
              **{"mechanism-params": json.dumps({"clip": 1.0, "laplace_scale": 1e-4})}),
        "unaccountable", "Laplace PLD's numeric range"),
    4: (_meta(mechanism="client-gaussian",
              **{"mechanism-params": json.dumps({"clip": 1.0, "noise_multiplier": 1e-4})}),
        "unaccountable", "Gaussian PLD's numeric range"),
    5: (_metrics(lambda m: {**m, "extra": 1.0}), None, ""),
    6: (_metrics(lambda m: {k: v for k, v in m.items() if k != "train-loss"}), None, ""),
    7: (_metrics(lambda m: {**m, "per-class": [1.0] * 7}), None, ""),  # a list FedAvg would add
    8: (_renamed_records, None, ""),
    9: (_arrays(lambda a: {f"{k}.renamed": v for k, v in a.items()}), "malformed", "arrays"),
    10: (_arrays(lambda a: {k: v.astype(np.float64) for k, v in a.items()}), "malformed",
         "dtypes"),
    11: (_arrays(_nan), "non-finite", "NaN"),
    12: (_metrics(lambda m: {**m, "num-examples": [1.0, 2.0]}), "malformed", "num-examples"),
    13: (_metrics(lambda m: {**m, "train-loss": math.nan}), "malformed", "train-loss"),
    14: (_meta(mechanism="x" * 1_000_000), "malformed", "mechanism"),
    15: (_meta(declined="y" * 1_000_000), "malformed", "declined"),
    16: (_meta(lr=1e-300), "inconsistent", "cannot be tested"),  # update / lr overflows
    17: (_tiny_batch, "inconsistent", "less noise than declared"),
}  # fmt: skip
AGGREGATED = sorted({*HONEST, *(p for p, (_, kind, _) in HOSTILE.items() if kind is None)})


def _hostile_app() -> ClientApp:

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        pid = int(context.node_config["partition-id"])
        if msg.metadata.message_type == MessageType.TRAIN and pid in HOSTILE:
            HOSTILE[pid][0](reply)
        return reply

    return client_app_with(mod)


@pytest.fixture(scope="module")
def run(tmp_path_factory):  # noqa: ANN001, ANN201
    cfg = load_config(QUICKSTART, SMALL)
    run_dir = tmp_path_factory.mktemp("hostile") / "run"
    return run_federation(LocalGrid(_hostile_app(), NUM_CLIENTS), cfg, run_dir), run_dir


def test_the_run_completes(run) -> None:  # noqa: ANN001
    report, _ = run
    assert report["status"] == "completed" and report["error"] is None
    assert report["rounds"] == 2 and all(math.isfinite(a) for a in report["accuracy"])
    assert not [f for f in report["failures"] if f["client_id"] is None], report["failures"]


@pytest.mark.parametrize("pid", sorted(p for p, (_, kind, _) in HOSTILE.items() if kind))
def test_each_hostile_reply_is_its_clients_failure(run, pid) -> None:  # noqa: ANN001
    report, _ = run
    _, kind, words = HOSTILE[pid]
    mine = [f for f in report["failures"] if f["node_id"] == str(1000 + pid)]
    assert [f["round"] for f in mine] == [1, 2], mine
    assert all(f["kind"] == kind and f["client_id"] == pid for f in mine), mine
    assert all(words in f["message"] and len(f["message"]) <= 500 for f in mine), mine


def test_every_other_update_is_aggregated(run) -> None:  # noqa: ANN001
    """Each round's aggregate is the FedAvg of exactly the accepted updates (stored Δ, weighted
    by their local sizes): nothing vetoed the round, nothing hostile entered it."""
    _, run_dir = run
    with AuditStore.open(run_dir, readonly=True) as store:
        for rnd in (1, 2):
            rows = store.query("SELECT client_id, status, num_examples FROM updates "
                               "WHERE round = ? ORDER BY client_id", (rnd,))
            accepted = [r["client_id"] for r in rows if r["status"] == "ok"]
            assert accepted == AGGREGATED, rows
            weights = {r["client_id"]: r["num_examples"] for r in rows}
            updates = {u.client_id: store.load_update(u.update_id)
                       for u in store.iter_updates(rounds=[rnd]) if u.status == "ok"}
            before = list(store.load_global(rnd).values())  # stored in the model's order
            after = list(store.load_aggregate(rnd).values())
            deltas = {c: list(u.values()) for c, u in updates.items()}
            total = sum(weights[c] for c in accepted)
            for i, theta in enumerate(before):
                mean = sum(weights[c] * deltas[c][i].astype(np.float64) for c in accepted) / total
                np.testing.assert_allclose(after[i], theta + mean, atol=1e-5)
            assert any(not np.array_equal(a, b) for a, b in zip(after, before, strict=True))


def test_the_accountant_that_refused_is_the_runs() -> None:
    """The boundary's question is the run's accountant's: the same declarations are accountable
    under RDP (so they are not refused there) — an independent check that the refusals come
    from the PLD's own ranges, not from a copy of them."""
    from fedpriv.accounting import ReleaseEvent
    from fedpriv.accounting.accountable import unaccountable

    for name, params, steps in (("gaussian", {"noise_multiplier": 1.0}, 100_000),
                                ("laplace", {"laplace_scale": 1e-4}, 1),
                                ("client-gaussian", {"noise_multiplier": 1e-4}, 1)):
        release = build_mechanism(name, params).release(13_700)
        events = [ReleaseEvent(release, 0.05, steps)]
        assert unaccountable(events, 1e-5, accountant="rdp") is None
        if name != "gaussian":
            assert unaccountable(events, 1e-5, accountant="pld") is not None


def test_a_failed_fold_leaves_the_ledger_as_it_was() -> None:
    """The fold is all or nothing: a declaration the PLD accountant refuses raises, and the
    client's tallies are those of a ledger that never saw it (an independent ledger)."""
    from fedpriv.errors import InputError
    from fedpriv.ledger import PrivacyLedger

    honest = build_mechanism("laplace", {"laplace_scale": 1.0}).release(100)
    hostile = build_mechanism("laplace", {"laplace_scale": 1e-4}).release(100)
    args = {"sample_rate": 0.1, "batch_size": 8, "dim": 100}
    ledger, reference = PrivacyLedger(1e-5, "pld"), PrivacyLedger(1e-5, "pld")
    for each in (ledger, reference):
        each.fold(1, 0, honest, steps=3, verification="consistent", **args)
    assert ledger.unaccountable(0, honest, steps=3, **args) is None
    reason = ledger.unaccountable(0, hostile, steps=1, **args)
    assert reason is not None and "laplace_scale" in reason
    with pytest.raises(InputError):
        ledger.fold(2, 0, hostile, steps=1, verification="consistent", **args)
    assert ledger.tally(0) == reference.tally(0)
    assert ledger.clients[0].rounds == [1] and len(ledger.clients[0].accountant.events) == 1
    assert 7 not in ledger.clients  # asking about a new client does not create it
    assert ledger.unaccountable(7, hostile, steps=1, **args) is not None
    assert 7 not in ledger.clients


def test_conformed_replies_aggregate_where_flower_refused() -> None:
    """A fedpriv reply (``train-loss``) beside a stock Flower reply (``train_loss``, a metric of
    its own, records under other names): Flower's FedAvg refuses them as they came, and
    aggregates them conformed — weighted by ``num-examples``, with no metric they do not share."""
    from flwr.app import RecordDict
    from flwr.serverapp.exception import InconsistentMessageReplies
    from flwr.serverapp.strategy import FedAvg
    from flwr.supercore.task_identity import TaskIdentity

    from strategies.replies import AcceptedReply, conform

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1

    def reply(arrays_key: str, metrics_key: str, value: float, metrics: dict) -> AcceptedReply:
        arrays = [np.full(3, value, np.float32)]
        content = RecordDict({arrays_key: ArrayRecord({"w": Array(arrays[0])}),
                              metrics_key: MetricRecord(metrics)})
        return AcceptedReply(1, 0, None, arrays, metrics["num-examples"],
                             Message(content, dst_node_id=1, message_type=MessageType.TRAIN))

    def replies() -> list[AcceptedReply]:
        return [reply("arrays", "metrics", 1.0, {"num-examples": 1, "train-loss": 0.5}),
                reply("weights", "m", 4.0, {"num-examples": 3, "train_loss": 0.7,
                                             "accuracy": 0.9})]

    with pytest.raises(InconsistentMessageReplies):
        FedAvg().aggregate_train(1, [r.message for r in replies()])
    arrays, metrics = FedAvg().aggregate_train(1, conform(replies()))
    np.testing.assert_allclose(arrays["w"].numpy(), np.full(3, (1 * 1.0 + 3 * 4.0) / 4))
    assert dict(metrics) == {}
    both = [reply("arrays", "metrics", 1.0, {"num-examples": 1, "train-loss": 0.5}),
            reply("a", "b", 3.0, {"num-examples": 1, "train-loss": 1.5, "extra": [1.0, 2.0]})]
    _, metrics = FedAvg().aggregate_train(1, conform(both))
    assert dict(metrics) == {"train-loss": 1.0}
