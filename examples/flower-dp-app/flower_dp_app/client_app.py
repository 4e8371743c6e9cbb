"""The ClientApp: plain local SGD behind Flower's ``fixedclipping_mod``, declared to fedpriv.

As in Flower's ``fl-dp-sa`` example the client clips its update to the norm the server's
``DifferentialPrivacyClientSideFixedClipping`` sends and adds no noise of its own; fedpriv's
``declare_fixed_clipping`` runs Flower's mod unchanged and declares that clip-only release, so
the server verifies the clipping (SecAgg+ is not available to Message-API strategies in
Flower 1.42: docs/protocol.md).
"""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod

from clients.flower_dp import declare_fixed_clipping
from flower_dp_app.task import client_points, make_model

app = ClientApp(mods=[declare_fixed_clipping(fixedclipping_mod)])


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Five full-batch SGD steps on this client's points."""
    model = make_model()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = client_points(int(context.node_config["partition-id"]))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    metrics = MetricRecord({"num-examples": int(x.shape[0]), "train-loss": loss.item()})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}),
                   reply_to=msg)
