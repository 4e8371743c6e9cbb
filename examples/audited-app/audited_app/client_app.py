"""The ClientApp: its own model and loader, trained with fedpriv's DP-SGD, which declares itself."""

from __future__ import annotations

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from audited_app.task import Net, load_data
from fedpriv.mechanisms import build_mechanism
from fedpriv.protocol import REPORT_RECORD
from fedpriv.seeding import client_noise_seed, make_generator
from fedpriv.training import private_train

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    """One round of record-level DP-SGD (Gaussian) on this client's loader."""
    pid = int(context.node_config["partition-id"])
    server_round = int(msg.content["config"]["server-round"])
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    mechanism = build_mechanism("gaussian", {
        "noise_multiplier": float(context.run_config.get("noise-multiplier", 1.0)),
        "clip": float(context.run_config.get("clip", 1.0)),
    })
    trained = private_train(
        model, load_data(pid), mechanism, lr=0.1, local_steps=4, batch_size=16,
        # batches and noise the client's secret, unless its node opts in to seed 0's stream
        generator=make_generator(client_noise_seed(0, context.node_config), pid, server_round),
        partition_id=pid,
        server_round=server_round, loss=nn.CrossEntropyLoss(reduction="none"),
    )
    return Message(RecordDict({
        "arrays": ArrayRecord(model.state_dict()),
        "metrics": MetricRecord({"num-examples": trained.report.local_examples,
                                 "train-loss": trained.result.loss}),
        REPORT_RECORD: ConfigRecord(trained.report.to_config()),  # what the server verifies
    }), reply_to=msg)
