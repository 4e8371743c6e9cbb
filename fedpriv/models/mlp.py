"""The reference MLP of the VMF vs Gaussian DP-SGD study (privacy-math.md §8).

256 → 50 → 15 → 10, sigmoid activations, no biases: 256·50 + 50·15 + 15·10 = 13,700 parameters,
for 16×16 grey-scale inputs.

``paper-mlp-standardized`` is the same network behind a fixed input standardisation
``x ↦ (x − μ)/σ`` with public constants (:data:`FMNIST16_MEAN`, :data:`FMNIST16_STD`: the pixel
mean and standard deviation of the 60,000 Fashion-MNIST training images as fedpriv resizes them
to 16×16), as ``torchvision.transforms.Normalize`` does in a published data pipeline. It is
part of the model, not of the data: images stay in [0, 1] for the attacks and their scores, which
differentiate through it; it has no parameters (p stays 13,700) and releases nothing. Trained on
standardised inputs the sigmoid MLP learns much faster under DP noise
(docs/results/paper-fmnist-recipe/study.md).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FMNIST16_MEAN", "FMNIST16_STD", "PaperMLP"]

#: Mean and standard deviation of every pixel of the Fashion-MNIST training images, bilinearly
#: resized to 16×16 as :func:`fedpriv.data.load_dataset` does (computed once, in float32; the
#: test ``tests/test_models.py`` recomputes them when the data set is installed).
FMNIST16_MEAN = 0.28545
FMNIST16_STD = 0.33624


class PaperMLP(nn.Module):
    """Bias-free sigmoid MLP 256 → 50 → 15 → 10 (13,700 parameters) on ``(x − input_mean) /
    input_std`` (the identity by default); returns logits."""

    def __init__(self, in_features: int = 256, num_classes: int = 10,
                 input_mean: float = 0.0, input_std: float = 1.0) -> None:
        super().__init__()
        if not input_std > 0:
            raise ValueError(f"input_std must be > 0, got {input_std}")
        # plain floats, not buffers: the state dict (what clients exchange) stays the weights
        self.input_mean, self.input_std = float(input_mean), float(input_std)
        self.fc1 = nn.Linear(in_features, 50, bias=False)
        self.fc2 = nn.Linear(50, 15, bias=False)
        self.fc3 = nn.Linear(15, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x.flatten(start_dim=1) - self.input_mean) / self.input_std
        h = torch.sigmoid(self.fc1(x))
        h = torch.sigmoid(self.fc2(h))
        return self.fc3(h)
