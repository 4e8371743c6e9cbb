"""The example app (examples/audited-app: its own model, data and ClientApp; Flower's FedAvg in
a ServerApp through ``strategies.audit_strategy``) runs two rounds and its clients are verified."""

import json
import sys
from pathlib import Path

import pytest
from flwr.app import Context, RecordDict

from tests.reliability_support import LocalGrid

APP = Path(__file__).parents[1] / "examples" / "audited-app"


@pytest.fixture
def example_app(monkeypatch):
    monkeypatch.syspath_prepend(str(APP))
    from audited_app import client_app, server_app

    yield server_app, client_app
    for name in [m for m in sys.modules if m.startswith("audited_app")]:
        del sys.modules[name]


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
        assert client["guarantee"] == "verified"
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
        assert client["mechanism"] == "client-gaussian" and client["guarantee"] == "verified"
        assert client["rounds_participated"] == 2 and 0 < client["epsilon"] < float("inf")
