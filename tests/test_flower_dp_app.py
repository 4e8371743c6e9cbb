"""The fl-dp-sa-style example (examples/flower-dp-app: Flower's fixedclipping_mod declared on the
clients, DifferentialPrivacyClientSideFixedClipping with Flower's accountant on the server,
wrapped by ``strategies.audit_strategy``) runs three rounds in process; its report says what
each block protects against whom (docs/flower-dp.md)."""

import json
import math

import pytest
from flwr.app import Context, RecordDict

from fedpriv.audit.report_central import CLIP_ONLY
from tests.example_support import example_modules
from workflows.local_grid import LocalGrid


@pytest.fixture
def flower_dp_app(monkeypatch):
    yield from example_modules(monkeypatch, "flower-dp-app", "flower_dp_app")


def test_flower_dp_app_report(flower_dp_app, tmp_path):
    server_app, client_app = flower_dp_app
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(),
                      run_config={"num-server-rounds": 3, "num-clients": 2,
                                  "run-dir": str(tmp_path)})
    server_app.main(LocalGrid(client_app.app, num_nodes=2), context)
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["status"] == "completed" and not report["failures"]
    central = report["central"]
    assert central["wrapper"] == "DifferentialPrivacyClientSideFixedClipping"
    assert central["clipping"] == "client" and central["releases"] == 3
    assert central["epsilon"] == pytest.approx(8.385, abs=2e-3)  # σ = 1, every client, 3 rounds
    assert central["flower_epsilon"] == pytest.approx(9.010, abs=1e-3)
    for client in report["clients"]:
        assert client["verification"]["status"] == "consistent"
        assert client["flower_mod"] == {"mod": "fixedclipping_mod", "clipping_norm": 1.0}
        assert float(client["epsilon"]) == math.inf and client["epsilon_reason"] == CLIP_ONLY
