"""The wire protocol's edges: versions, a server that is not fedpriv's, readable failures.

docs/protocol.md is the contract; these tests pin the messages it quotes.
"""

from __future__ import annotations

import math

import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.serverapp.strategy import FedAvg
from reliability_support import QUICKSTART, LocalGrid

from fedpriv.audit import AuditStore
from fedpriv.failures import MAX_FAILURE, failure_line
from fedpriv.ledger import PrivacyLedger
from fedpriv.protocol import (
    CONFIG_KEY,
    PROTOCOL_KEY,
    PROTOCOL_VERSION,
    ClientReport,
    ProtocolError,
    ReplyError,
)
from strategies.server_run import initial_model
from workflows.config import load_config

# What Flower's Ray simulation engine sends for a ClientApp that raised (vce_api.worker's
# "<class 'T'>:<'str(ex)'>" around Ray's RayTaskError: the remote traceback, coloured).
RAY_REASON = (
    "<class 'ray.exceptions.RayTaskError(ClientAppException)'>:<'\x1b[36mray::ClientAppActor"
    ".run()\x1b[39m (pid=4321, ip=10.0.0.2, actor_id=ab12)\n"
    '  File "/venv/flwr/simulation/ray_transport/ray_actor.py", line 60, in run\n'
    "    out_message = app(message=message, context=context)\n"
    "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/repo/clients/client_app.py", line 92, in train\n'
    "\x1b[31mValueError\x1b[0m: data.root = 'x' holds no data set\n\n"
    "The above exception was the direct cause of the following exception:\n\n"
    "\x1b[36mray::ClientAppActor.run()\x1b[39m (pid=4321, ip=10.0.0.2, actor_id=ab12)\n"
    '  File "/venv/flwr/simulation/ray_transport/ray_actor.py", line 65, in run\n'
    "    raise ClientAppException(str(ex)) from ex\n"
    "flwr.clientapp.client_app.ClientAppException: \n"
    "Exception ClientAppException occurred. Message: data.root = 'x' holds no data set'>"
)


@pytest.mark.parametrize(("reason", "line"), [
    (RAY_REASON, "ValueError: data.root = 'x' holds no data set"),
    ("<class 'RuntimeError'>:<'injected fault: client 1 round 1'>",
     "RuntimeError: injected fault: client 1 round 1"),
    ("<class 'KeyError'>:<''fedpriv-config''>", "KeyError: 'fedpriv-config'"),
    ("<class 'flwr.clientapp.client_app.ClientAppException'>:<'\nException ClientAppException "
     "occurred. Message: boom'>", "ClientAppException: boom"),
    ("\x1b[1mmalformed reply\x1b[0m: reply field 'meta' = None",
     "malformed reply: reply field 'meta' = None"),
])  # fmt: skip
def test_a_failure_is_one_readable_line_with_its_exception_type(reason, line):
    assert failure_line(reason) == line


def test_a_long_failure_is_cut_to_the_bound():
    line = failure_line("<class 'ValueError'>:<'" + "x" * 5000 + "'>")
    assert len(line) == MAX_FAILURE and line.startswith("ValueError: xxx") and line[-1] == "…"


def test_the_store_keeps_failures_as_one_line(tmp_path):
    with AuditStore.create(tmp_path / "run", {}, 0) as store:
        store.begin_round(1)
        store.record_failure(1, "exception", RAY_REASON, node_id=7)
        store.write_update(1, 0, None, {"status": "failed", "error": RAY_REASON})
        store.mark_status("failed", "Traceback (most recent call last):\n  File \"x\", line 1\n"
                                    "\x1b[31mRuntimeError\x1b[0m: lost")
        message = store.query("SELECT message FROM failures")[0]["message"]
        error = store.query("SELECT error FROM updates")[0]["error"]
        assert message == error == "ValueError: data.root = 'x' holds no data set"
        assert store.run_info()["error"] == "RuntimeError: lost"


def _report(**fields: object) -> dict:
    base = {"partition-id": 0, "server-round": 1, "local-examples": 10, "steps": 1, "lr": 0.1,
            "batch-size": 5.0, "sampling": "poisson", "sample-rate": 0.5,
            "mechanism": "gaussian", "mechanism-params": '{"clip": 1.0, "noise_multiplier": 1.0}'}
    return {**base, **fields}


def test_a_report_without_a_version_is_version_1_and_writes_its_version():
    report = ClientReport.from_config(_report())
    assert report.to_config()["protocol-version"] == PROTOCOL_VERSION == 1
    assert ClientReport.from_config(report.to_config()) == report


def test_the_seeded_noise_stream_travels_with_the_oracle_only():
    """``noise-stream`` (fedpriv/verification/committed.py) is read beside ``record-ids``, round
    trips, and is refused naming the field with another value or without the oracle."""
    from fedpriv.seeding import SEEDED_NOISE

    seeded = ClientReport.from_config(_report(**{"record-ids": "[[1, 2]]",
                                                 "noise-stream": SEEDED_NOISE}))
    assert seeded.oracle is not None and seeded.oracle.noise_stream == SEEDED_NOISE
    assert ClientReport.from_config(seeded.to_config()) == seeded
    plain = ClientReport.from_config(_report(**{"record-ids": "[[1, 2]]"}))
    assert plain.oracle.noise_stream is None and "noise-stream" not in plain.to_config()
    for fields in ({"record-ids": "[[1]]", "noise-stream": "numpy"},
                   {"noise-stream": SEEDED_NOISE}):
        with pytest.raises(ReplyError, match="'noise-stream'"):
            ClientReport.from_config(_report(**fields))


@pytest.mark.parametrize("version", [2, 0, "1", True])
def test_a_report_of_another_version_names_both(version):
    with pytest.raises(ReplyError) as caught:
        ClientReport.from_config(_report(**{"protocol-version": version}))
    assert str(caught.value) == (f"reply field 'protocol-version' = {version!r}: expected "
                                 "protocol version 1, the one this server speaks "
                                 "(docs/protocol.md)")


def test_fedprivs_client_under_flowers_stock_server_names_the_missing_config():
    """Flower's stock FedAvg ServerApp sends ``arrays`` and ``config`` (``server-round``
    only): fedpriv's ClientApp says what is missing and where to read about it."""
    from clients.client_app import app

    cfg = load_config(QUICKSTART, ["data.num_clients=2"])
    grid = LocalGrid(app, 2)
    arrays = ArrayRecord(initial_model(cfg).state_dict())
    messages = list(FedAvg().configure_train(1, arrays, ConfigRecord({"lr": 0.1}), grid))
    replies = grid.send_and_receive(messages)
    assert all(r.has_error() for r in replies)
    assert failure_line(replies[0].error.reason) == (
        "ProtocolError: fedpriv's ClientApp needs fedpriv's run config, but the train message "
        "has no key 'fedpriv-config' in its ConfigRecord 'config': serve it with fedpriv's "
        "ServerApp, or send the config as docs/protocol.md describes")


def test_fedprivs_client_refuses_a_server_of_another_version():
    from clients.client_app import train

    LocalGrid(train, 1)  # Flower's task identity, for Message()
    config = ConfigRecord({CONFIG_KEY: "{}", PROTOCOL_KEY: 2, "server-round": 1})
    msg = Message(RecordDict({"config": config}), dst_node_id=1000,
                  message_type=MessageType.TRAIN)
    context = Context(run_id=1, node_id=1000, state=RecordDict(), run_config={},
                      node_config={"partition-id": 0, "num-partitions": 1})
    with pytest.raises(ProtocolError) as caught:
        train(msg, context)
    assert str(caught.value) == ("the server speaks fedpriv protocol version 2 "
                                 "(fedpriv-protocol); this client speaks version 1 "
                                 "(docs/protocol.md)")


def test_an_undeclared_round_makes_every_bound_infinite_from_then_on():
    """After a declared round, an undeclared one: ε, log C and the MBP bound are ∞, the
    declared values are kept beside them, and a later declared round changes nothing."""
    from fedpriv.mechanisms import build_mechanism

    ledger = PrivacyLedger(1e-5)
    release = build_mechanism("gaussian", {"clip": 1.0, "noise_multiplier": 1.0}).release(10)
    first = ledger.fold(1, 0, release, steps=2, sample_rate=0.1, batch_size=4, dim=10,
                        verification="consistent")
    second = ledger.fold_undeclared(2, 0)
    assert math.isfinite(first["epsilon"]) and first["guarantee"] == "verified"
    assert second["guarantee"] == "undeclared" and second["epsilon_declared"] == first["epsilon"]
    for key in ("epsilon", "log_capacity_cumulative", "log_capacity_round", "mbp_bound"):
        assert math.isinf(second[key])
    third = ledger.fold(3, 0, release, steps=2, sample_rate=0.1, batch_size=4, dim=10,
                        verification="consistent")
    assert math.isinf(third["epsilon"]) and third["guarantee"] == "undeclared"
    assert math.isinf(ledger.mbp_bound(0))
