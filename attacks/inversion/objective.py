"""Gradient matching shared by the optimisation attacks (DLG, iDLG, IGA).

The client releases the gradient of the batch-mean cross-entropy loss of the model's logits
(privatised); the attacks search for inputs whose gradient at θ matches the released one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from attacks.result import Trial
from attacks.view import ServerView

__all__ = [
    "GradientMatcher",
    "best_trial",
    "cosine_distance",
    "l2_distance",
    "to_numpy_images",
    "total_variation",
]


class GradientMatcher:
    """The model at θ, the released gradient g̃ and the input domain of one view, on
    ``device``, where the attack's optimisation runs."""

    def __init__(self, view: ServerView, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.model = view.build_model().to(self.device)
        self.params = list(self.model.parameters())
        self.target = [torch.from_numpy(g).to(self.device) for g in view.gradient()]
        self.input_shape = view.input_shape
        self.num_classes = view.num_classes
        self.low, self.high = view.data_range

    def gradient(self, images: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """∇θ of the batch-mean cross-entropy at ``images``, differentiable in the inputs.

        ``targets`` are class indices (int64) or class probabilities (soft labels).
        """
        loss = F.cross_entropy(self.model(images), targets)
        return torch.autograd.grad(loss, self.params, create_graph=True)

    def initial_images(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """Uniform random images in the data range: the attack's starting point (prior).

        The reference codes draw N(0, 1); uniform keeps the prior inside the scored range.
        Drawn on the CPU generator (the same start on every device), then moved to the device.
        """
        u = torch.rand((n, *self.input_shape), generator=generator)
        return (self.low + (self.high - self.low) * u).to(self.device)

    def clamp_(self, images: torch.Tensor) -> torch.Tensor:
        """Project onto the data range in place."""
        return images.clamp_(self.low, self.high)


def l2_distance(grads: Sequence[torch.Tensor], target: Sequence[torch.Tensor]) -> torch.Tensor:
    """Σ_layers ‖∇θL(x') − g̃‖² (Zhu et al. 2019, "Deep leakage from gradients", eq. 4)."""
    return sum(((g - t) ** 2).sum() for g, t in zip(grads, target, strict=True))


def cosine_distance(grads: Sequence[torch.Tensor], target: Sequence[torch.Tensor]) -> torch.Tensor:
    """1 − cos(∇θL(x'), g̃) over all parameters jointly (Geiping et al. 2020, eq. 4)."""
    dot = sum((g * t).sum() for g, t in zip(grads, target, strict=True))
    g_norm = torch.sqrt(sum((g**2).sum() for g in grads))
    t_norm = torch.sqrt(sum((t**2).sum() for t in target))
    return 1.0 - dot / (g_norm * t_norm).clamp_min(torch.finfo(dot.dtype).tiny)


def total_variation(images: torch.Tensor) -> torch.Tensor:
    """Anisotropic TV as in Geiping et al.'s reference code: mean |∂x| + mean |∂y|."""
    dx = (images[..., :, 1:] - images[..., :, :-1]).abs().mean()
    dy = (images[..., 1:, :] - images[..., :-1, :]).abs().mean()
    return dx + dy


def best_trial(run_one: Callable[[], Trial], restarts: int) -> Trial:
    """Run ``run_one`` ``restarts`` times and keep the trial of least (finite) loss."""
    best = run_one()
    for _ in range(restarts - 1):
        trial = run_one()
        if _key(trial) < _key(best):
            best = trial
    return best


def _key(trial: Trial) -> float:
    return trial.loss if np.isfinite(trial.loss) else np.inf


def to_numpy_images(images: torch.Tensor, low: float, high: float) -> np.ndarray:
    """Detach, clip to the data range and return float32 numpy (on the CPU)."""
    return images.detach().clamp(low, high).cpu().numpy().astype(np.float32)
