"""The app's model and data: logistic regression on synthetic points (any torch model will do)."""

from __future__ import annotations

import torch
from torch import nn

INPUTS = 4


def make_model() -> nn.Module:
    """A single linear layer: two logits from ``INPUTS`` features."""
    return nn.Linear(INPUTS, 2)


def client_points(partition_id: int, count: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """This client's points, labelled by the sign of their first feature (seeded by the id)."""
    rng = torch.Generator().manual_seed(7 * partition_id + 1)
    points = torch.randn(count, INPUTS, generator=rng)
    return points, (points[:, 0] > 0).long()
