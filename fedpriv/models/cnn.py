"""A small CNN for 28×28 and 32×32 inputs (grey or RGB), in the spirit of LeNet.

Uses sigmoid activations, as gradient-inversion studies do (ReLU's zero gradients make
reconstruction harder and hide leakage), and adaptive pooling so one class serves both sizes.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SmallCNN"]


class SmallCNN(nn.Module):
    """conv(12,5) → conv(12,5,stride 2) → conv(12,5) → adaptive pool 4×4 → linear; logits."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 12, kernel_size=5, padding=2),
            nn.Sigmoid(),
            nn.Conv2d(12, 12, kernel_size=5, padding=2, stride=2),
            nn.Sigmoid(),
            nn.Conv2d(12, 12, kernel_size=5, padding=2),
            nn.Sigmoid(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.head = nn.Linear(12 * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(start_dim=1))
