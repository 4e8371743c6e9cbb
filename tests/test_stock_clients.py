"""A stock Flower ClientApp against fedpriv's server: audited as undeclared, not refused.

The client is Flower's quickstart-pytorch ClientApp (:mod:`stock_client`: local tensors, the
paper MLP's shape, nothing else changed); the server is the real ServerApp body
(:func:`strategies.server_run.run_federation`) on the in-process grid of
:mod:`reliability_support`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import stock_client
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from reliability_support import QUICKSTART, LocalGrid, run_on_ray

from fedpriv.audit import AuditStore
from fedpriv.protocol import ClientReport, ProtocolError, server_config
from strategies.server_run import run_federation
from workflows.config import load_config

PLAIN = ["rounds=2", "data.num_clients=3", "train.lr=0.5", "train.local_steps=2",
         "train.batch_size=8", "audit.attacks=[]"]  # fmt: skip
# every client of every round attacked (the default attacks one client every 5th round)
SMALL = [*PLAIN, "audit.attacks=['iga']", "audit.iterations=5", "audit.clients='all'",
         "audit.every=1"]  # fmt: skip


@pytest.fixture(scope="module")
def stock_run(tmp_path_factory):
    cfg = load_config(QUICKSTART, SMALL)
    run_dir = tmp_path_factory.mktemp("stock") / "run"
    report = run_federation(LocalGrid(stock_client.app, 3), cfg, run_dir)
    return run_dir, report


def test_stock_clients_are_tallied_undeclared_with_unbounded_epsilon(stock_run):
    _, report = stock_run
    assert report["status"] == "completed" and report["rounds"] == 2
    assert report["failures"] == []
    clients = report["clients"]
    assert [c["client_id"] for c in clients] == [3, 4, 5]  # from data.num_clients up
    for client in clients:
        assert client["guarantee"] == "undeclared"
        assert math.isinf(client["epsilon"]) and math.isinf(client["log_bayes_capacity"])
        assert client["epsilon_declared"] is None
        assert client["verification"]["status"] == "undeclared"
        assert client["rounds_participated"] == 2 and client["undeclared_rounds"] == [1, 2]
    assert report["verification"]["undeclared"] == 6
    page = Path(report["files"]["html"]).read_text()
    assert "undeclared (the client sent no report to test" in page  # the glossary says why
    assert 'id="verification"' in page


def test_stock_updates_are_stored_aggregated_and_attacked(stock_run):
    run_dir, _ = stock_run
    with AuditStore.open(run_dir, readonly=True) as store:
        updates = list(store.iter_updates())
        assert {(u.round, u.client_id, u.status) for u in updates} == {
            (r, c, "undeclared") for r in (1, 2) for c in (3, 4, 5)}
        assert all(u.report is None and u.stored and u.node_id for u in updates)
        # the node keeps its client id from round to round
        assert len({(u.node_id, u.client_id) for u in updates}) == 3
        theta = list(store.load_global(1).values())
        after = list(store.load_aggregate(1).values())
        deltas = [list(store.load_update(u.update_id).values()) for u in updates if u.round == 1]
        attacks = store.query("SELECT round, client_id, attack, ssim, tensor_id FROM attacks")
    assert any(not np.array_equal(a, t) for a, t in zip(after, theta, strict=True))  # it moved
    mean = [t + sum(d[k] for d in deltas) / 3 for k, t in enumerate(theta)]  # equal weights
    for got, want in zip(after, mean, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert sorted((a["round"], a["client_id"]) for a in attacks) == [
        (r, c) for r in (1, 2) for c in (3, 4, 5)]
    assert all(a["attack"] == "iga" and a["ssim"] is None and a["tensor_id"] for a in attacks)


def test_refuse_records_the_failure_and_keeps_the_model(tmp_path):
    cfg = load_config(QUICKSTART, [*PLAIN, "rounds=1", "audit.undeclared=refuse"])
    report = run_federation(LocalGrid(stock_client.app, 3), cfg, tmp_path / "run")
    assert report["status"] == "completed"
    kinds = {(f["client_id"], f["kind"]) for f in report["failures"]}
    assert kinds == {(3, "undeclared"), (4, "undeclared"), (5, "undeclared")}
    message = report["failures"][0]["message"]
    assert message == ("undeclared reply: no 'meta' ConfigRecord (fedpriv's client report, "
                       "docs/protocol.md), so nothing bounds its privacy; "
                       "audit.undeclared = 'refuse'")
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        theta = list(store.load_global(1).values())
        after = list(store.load_aggregate(1).values())
    assert all(np.array_equal(a, t) for a, t in zip(after, theta, strict=True))


def test_a_report_of_an_unknown_protocol_version_is_refused_naming_both():
    config = {"protocol-version": 2}
    with pytest.raises(ValueError) as caught:
        ClientReport.from_config(config)
    assert str(caught.value) == ("reply field 'protocol-version' = 2: expected protocol "
                                 "version 1, the one this server speaks (docs/protocol.md)")


def test_fedprivs_client_without_fedprivs_config_names_what_is_missing():
    with pytest.raises(ProtocolError, match="no key 'fedpriv-config' in its ConfigRecord "
                       "'config'.*docs/protocol.md"):
        server_config(ConfigRecord({"lr": 0.1}))
    with pytest.raises(ProtocolError, match="speaks fedpriv protocol version 7"):
        server_config(ConfigRecord({"fedpriv-config": "{}", "fedpriv-protocol": 7}))


def test_a_stock_reply_must_match_the_broadcast(tmp_path):
    """Names, shapes and dtypes as broadcast, and num-examples: else the client's failure."""
    from strategies.replies import Rejection, RoundIdentities, check_reply

    theta = [np.zeros((2, 3), np.float32)]
    grid = LocalGrid(stock_client.app, 1)  # sets Flower's task identity for Message()
    assert grid.get_node_ids()

    def reply(arrays: dict, metrics: dict) -> Message:
        content = RecordDict({"arrays": ArrayRecord({k: _array(v) for k, v in arrays.items()}),
                              "metrics": MetricRecord(metrics)})
        msg = Message(content, dst_node_id=7, message_type="train")
        return Message(content, reply_to=msg)

    cases = {
        "name": (reply({"w": theta[0]}, {"num-examples": 4}), "malformed", "names"),
        "shape": (reply({"fc": np.zeros((3, 2), np.float32)}, {"num-examples": 4}), "shape",
                  "update shapes"),
        "dtype": (reply({"fc": np.zeros((2, 3), np.float64)}, {"num-examples": 4}),
                  "malformed", "dtypes"),
        "weight": (reply({"fc": theta[0]}, {"train_loss": 1.0}), "malformed", "num-examples"),
    }
    for name, (msg, kind, words) in cases.items():
        outcome = check_reply(msg, theta, RoundIdentities.start(2, {}), node=7, names=["fc"])
        assert isinstance(outcome, Rejection), name
        assert outcome.kind == kind and words in outcome.reason, (name, outcome.reason)
        assert outcome.client_id == 2  # the node's id, from num_clients up


def _array(value: np.ndarray):  # noqa: ANN202
    from flwr.app import Array

    return Array(value)


def test_a_resumed_run_keeps_each_nodes_client_id(tmp_path):
    """``--resume`` rebuilds node → client id from the store: a node that joins after the
    restart and is read first gets a new id, not one of the ids already given."""
    from flwr.app import Context, RecordDict
    from reliability_support import Killed

    cfg = load_config(QUICKSTART, [*PLAIN, "rounds=2"])
    with pytest.raises(Killed):
        run_federation(LocalGrid(stock_client.app, 3, stop_at=2), cfg, tmp_path / "run")
    grid = LocalGrid(stock_client.app, 3)
    grid.contexts[999] = Context(run_id=1, node_id=999, state=RecordDict(), run_config={},
                                 node_config={"partition-id": 3, "num-partitions": 4})
    grid.node_partitions = None  # a node no engine knows joins: a deployment's grid
    report = run_federation(grid, cfg, tmp_path / "run", resume=True)
    assert report["status"] == "completed"
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        ids = {(u.round, u.node_id): u.client_id for u in store.iter_updates()}
    assert ids == {**{(r, str(1000 + p)): 3 + p for r in (1, 2) for p in range(3)},
                   (2, "999"): 6}


def test_fedpriv_audit_attacks_stored_undeclared_updates_again(stock_run, tmp_path):
    """``fedpriv audit`` reads an undeclared update with the run's [train] settings, as live;
    with the same seed and settings it reconstructs what the live attack did."""
    import shutil

    from workflows.offline_audit import audit_run

    run_dir = tmp_path / "copy"
    shutil.copytree(stock_run[0], run_dir)
    out = audit_run(run_dir, rounds=(1, 1), progress=False)
    assert sorted((a["round"], a["client_id"], a["scored"]) for a in out["attacks"]) == [
        (1, c, False) for c in (3, 4, 5)]
    with AuditStore.open(run_dir, readonly=True) as store:
        rows = store.query("SELECT attack_id, client_id FROM attacks WHERE round = 1 "
                           "ORDER BY client_id, attack_id")
        for live, offline in zip(rows[0::2], rows[1::2], strict=True):
            np.testing.assert_allclose(store.load_reconstruction(offline["attack_id"])["images"],
                                       store.load_reconstruction(live["attack_id"])["images"],
                                       atol=1e-5)


@pytest.mark.slow
def test_stock_clients_on_flowers_ray_simulation(tmp_path):
    """The same on Flower's simulation engine (Ray): random node ids, real error handling."""
    cfg = load_config(QUICKSTART, [*PLAIN, "rounds=2"])
    result = run_on_ray(cfg, stock_client.app, 3, tmp_path / "run")
    assert result["status"] == "completed" and result["failures"] == []
    assert [(c["client_id"], c["guarantee"], c["rounds_participated"])
            for c in result["clients"]] == [(c, "undeclared", 2) for c in (3, 4, 5)]
    assert all(math.isinf(c["epsilon"]) for c in result["clients"])
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        theta = list(store.load_global(1).values())
        after = list(store.load_aggregate(2).values())
    assert any(not np.array_equal(a, t) for a, t in zip(after, theta, strict=True))


def test_a_known_node_that_stops_declaring_keeps_its_client_id():
    """A node that claimed partition 1 before and now sends no report is client 1, undeclared
    (its tallies become unbounded); a new node gets the next id from num_clients up."""
    from strategies.replies import AcceptedReply, RoundIdentities, check_reply

    LocalGrid(stock_client.app, 1)  # Flower's task identity, for Message()
    theta = np.zeros((2, 3), np.float32)
    content = RecordDict({"arrays": ArrayRecord({"fc": _array(theta + 1)}),
                          "metrics": MetricRecord({"num-examples": 4})})
    identities = RoundIdentities.start(3, {7: 1, 8: 3})
    ids = []
    for node in (7, 9):
        msg = Message(content, reply_to=Message(content, dst_node_id=node, message_type="train"))
        outcome = check_reply(msg, [theta], identities, node=node, names=["fc"])
        assert isinstance(outcome, AcceptedReply) and outcome.report is None
        ids.append(outcome.client_id)
    assert ids == [1, 4] and identities.node_clients == {7: 1, 8: 3, 9: 4}


def test_the_storage_policy_applies_to_undeclared_updates(tmp_path):
    cfg = load_config(QUICKSTART, [*PLAIN, "rounds=1", "audit.store_updates=none"])
    report = run_federation(LocalGrid(stock_client.app, 3), cfg, tmp_path / "run")
    assert report["storage"]["updates_not_stored"] == 3
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        assert [u.stored for u in store.iter_updates()] == [False] * 3
