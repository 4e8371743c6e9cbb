"""The app's own model and data: a small MLP on a synthetic two-class problem."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 8
CLASSES = 2


class Net(nn.Module):
    """Two linear layers and a ReLU (any torch model will do)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def load_data(partition_id: int, records: int = 64) -> DataLoader:
    """This client's records: points labelled by the side of a fixed hyperplane."""
    generator = torch.Generator().manual_seed(1000 + partition_id)
    x = torch.randn(records, FEATURES, generator=generator)
    y = (x.sum(dim=1) > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=16)
