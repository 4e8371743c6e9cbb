"""The reference MLP of the VMF vs Gaussian DP-SGD study (privacy-math.md §8).

256 → 50 → 15 → 10, sigmoid activations, no biases: 256·50 + 50·15 + 15·10 = 13,700 parameters,
for 16×16 grey-scale inputs.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PaperMLP"]


class PaperMLP(nn.Module):
    """Bias-free sigmoid MLP 256 → 50 → 15 → 10 (13,700 parameters); returns logits."""

    def __init__(self, in_features: int = 256, num_classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, 50, bias=False)
        self.fc2 = nn.Linear(50, 15, bias=False)
        self.fc3 = nn.Linear(15, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sigmoid(self.fc1(x.flatten(start_dim=1)))
        h = torch.sigmoid(self.fc2(h))
        return self.fc3(h)
