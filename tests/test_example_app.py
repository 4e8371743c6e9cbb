"""The example app (examples/audited-app: its own model, data and ClientApp; Flower's FedAvg in
a ServerApp through ``strategies.audit_strategy``) runs two rounds and its clients are verified."""

import json

import pytest
from flwr.app import Context, RecordDict

from tests.example_support import example_modules
from tests.label_support import assert_labelled_by_tests
from tests.reliability_support import LocalGrid


@pytest.fixture
def example_app(monkeypatch):
    yield from example_modules(monkeypatch, "audited-app", "audited_app")


def test_example_app_runs_two_audited_rounds(example_app, tmp_path):
    server_app, client_app = example_app
    grid = LocalGrid(client_app.app, num_nodes=2)
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                      run_config={"num-server-rounds": 2, "run-dir": str(tmp_path)})
    server_app.main(grid, context)
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["status"] == "completed" and len(report["accuracy"]) == 2
    assert [c["client_id"] for c in report["clients"]] == [0, 1]
    for client in report["clients"]:
        assert client["mechanism"] == "gaussian" and client["rounds_participated"] == 2
        assert_labelled_by_tests(client)
        assert 0 < client["epsilon"] < float("inf")
    assert not report["failures"]


def test_example_app_with_client_level_dp_is_verified(example_app, tmp_path):
    """The one-line switch the example's README names: its own ``train`` behind fedpriv's
    client-level DP mod, which then declares the whole update's release."""
    client_dp = pytest.importorskip("clients.client_dp")
    from flwr.clientapp import ClientApp

    server_app, client_app = example_app
    app = ClientApp()
    app.train(mods=[client_dp.fedpriv_client_dp_mod(clip=1.0, noise_multiplier=1.0, seed=0)])(
        client_app.train)
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                      run_config={"num-server-rounds": 2, "run-dir": str(tmp_path)})
    server_app.main(LocalGrid(app, num_nodes=2), context)
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["status"] == "completed"
    for client in report["clients"]:
        assert client["mechanism"] == "client-gaussian"
        assert_labelled_by_tests(client)
        assert client["rounds_participated"] == 2 and 0 < client["epsilon"] < float("inf")


def test_attacks_run_on_the_apps_own_model_unscored(example_app, tmp_path):
    """``audit.attacks`` in a user's app: the attack rebuilds the user's model from
    ``model_factory`` and runs on every client's update; with no ground truth it is unscored."""
    import sqlite3

    from flwr.app import ArrayRecord
    from flwr.serverapp.strategy import FedAvg

    from strategies import audit_strategy

    _, client_app = example_app
    from audited_app.task import CLASSES, FEATURES, Net

    strategy = audit_strategy(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.0), run_dir=tmp_path / "audit",
        num_clients=2, audit={"attacks": ["dlg"], "iterations": 5, "clients": "all"},
        model_factory=Net, input_shape=(FEATURES,), num_classes=CLASSES,
    )
    strategy.start(grid=LocalGrid(client_app.app, num_nodes=2),
                   initial_arrays=ArrayRecord(Net().state_dict()), num_rounds=1)
    with sqlite3.connect(tmp_path / "audit" / "audit.sqlite") as db:
        rows = db.execute("SELECT client_id, attack, ssim FROM attacks ORDER BY client_id")
        assert rows.fetchall() == [(0, "dlg", None), (1, "dlg", None)]
        assert db.execute("SELECT COUNT(*) FROM failures").fetchone() == (0,)
