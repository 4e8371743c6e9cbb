"""A stock Flower ClientApp, written the way Flower 1.42's quickstart-pytorch template is.

Flower's template (``flwr new --framework pytorch``; ``examples/quickstart-pytorch``) loads the
received ``arrays`` into its ``Net``, trains on its data loader with the ``lr`` of the train
config, and replies with an ``ArrayRecord`` under ``"arrays"`` and a ``MetricRecord`` under
``"metrics"`` holding ``train_loss`` and ``num-examples`` — no fedpriv report. Two things are
swapped, as the issue asks: the data are local tensors (seeded per partition) instead of a
Flower Datasets partition, and ``Net`` is shaped as the paper MLP (256 → 50 → 15 → 10, sigmoid,
no biases) so that its parameters match what fedpriv's server broadcasts. The ``run_config``
keys the template reads (``local-epochs``, ``batch-size``) fall back to the template's
``pyproject.toml`` values (1, 32): the in-process grid and ``run_simulation`` give an empty run
config. The device is the CPU (the template picks CUDA when there is one). The learning rate
is the train config's ``lr``, as in the template: fedpriv's server sends ``train.lr`` under it.
"""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

__all__ = ["Net", "app"]


class Net(nn.Module):
    """The template's model, shaped as the paper MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(256, 50, bias=False)
        self.fc2 = nn.Linear(50, 15, bias=False)
        self.fc3 = nn.Linear(15, 10, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sigmoid(self.fc1(x.flatten(start_dim=1)))
        x = torch.sigmoid(self.fc2(x))
        return self.fc3(x)


def load_data(partition_id: int, num_partitions: int, batch_size: int) -> DataLoader:
    """Local tensors in place of the template's Flower Datasets partition (seeded by it)."""
    generator = torch.Generator().manual_seed(1000 * num_partitions + partition_id)
    images = torch.rand(64, 1, 16, 16, generator=generator)
    labels = torch.randint(0, 10, (64,), generator=generator)
    return DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True,
                      generator=generator)


def train_fn(net: nn.Module, trainloader: DataLoader, epochs: int, lr: float,
             device: torch.device) -> float:
    """The template's training loop: SGD on cross-entropy, the mean loss returned."""
    net.to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    net.train()
    running_loss = 0.0
    for _ in range(epochs):
        for images, labels in trainloader:
            optimizer.zero_grad()
            loss = criterion(net(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
    return running_loss / (epochs * len(trainloader))


app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Train the model on local data (Flower's template, verbatim in structure)."""
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    device = torch.device("cpu")
    model.to(device)

    partition_id = context.node_config["partition-id"]
    num_partitions = context.node_config["num-partitions"]
    batch_size = context.run_config.get("batch-size", 32)
    trainloader = load_data(partition_id, num_partitions, batch_size)

    train_loss = train_fn(
        model,
        trainloader,
        context.run_config.get("local-epochs", 1),
        msg.content["config"]["lr"],
        device,
    )

    model_record = ArrayRecord(model.state_dict())
    metrics = {
        "train_loss": train_loss,
        "num-examples": len(trainloader.dataset),
    }
    metric_record = MetricRecord(metrics)
    content = RecordDict({"arrays": model_record, "metrics": metric_record})
    return Message(content=content, reply_to=msg)
