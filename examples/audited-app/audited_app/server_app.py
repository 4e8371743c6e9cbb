"""The ServerApp: Flower's own FedAvg, wrapped by fedpriv's auditor."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from audited_app.task import CLASSES, FEATURES, Net, load_data
from strategies import audit_strategy

app = ServerApp()


def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    """Accuracy and loss of the global model on held-out points (the app's own evaluation)."""
    model = Net()
    model.load_state_dict(arrays.to_torch_state_dict())
    x, y = load_data(partition_id=10_000).dataset.tensors
    with torch.no_grad():
        logits = model(x)
    return MetricRecord({"accuracy": float((logits.argmax(1) == y).float().mean()),
                         "loss": float(torch.nn.functional.cross_entropy(logits, y))})


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run ``num-server-rounds`` audited FedAvg rounds; the report goes to ``run-dir``."""
    config = context.run_config
    run_dir = str(config.get("run-dir", "")) or tempfile.mkdtemp(prefix="audited-app-")
    strategy = audit_strategy(
        FedAvg(fraction_train=1.0, fraction_evaluate=0.0),
        run_dir=Path(run_dir, "audit"), num_clients=int(config.get("num-clients", 2)),
        audit={"delta": 1e-5}, model_factory=Net, input_shape=(FEATURES,), num_classes=CLASSES,
    )
    strategy.start(grid=grid, initial_arrays=ArrayRecord(Net().state_dict()),
                   num_rounds=int(config.get("num-server-rounds", 2)), evaluate_fn=evaluate)
    print(f"audit report: {Path(run_dir, 'audit', 'report.json')}")
