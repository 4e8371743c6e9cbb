"""What the gradient-matching attacks minimise: the problem, the distances, the regularisers.

The client releases the gradient of the batch-mean cross-entropy loss of the model's logits
(privatised); the attacks search for inputs whose gradient at θ matches the released one.
:class:`InversionProblem` holds what one view poses (model at θ, released gradient g̃, input
domain); the distances compare two gradients and the regularisers score the images alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attacks.view import ServerView

__all__ = [
    "InversionProblem",
    "TotalVariation",
    "cosine_distance",
    "l2_distance",
    "total_variation",
]


def _clips_each_example(view: ServerView) -> bool:
    """Whether the view's declared mechanism clips each example's gradient (public)."""
    from fedpriv.mechanisms import build_mechanism

    mechanism = build_mechanism(view.mechanism, view.mechanism_params)
    return getattr(mechanism, "clip_bounds", None) is not None and mechanism.level == "record"


class InversionProblem:
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
        self.clipped = _clips_each_example(view)

    def gradient(
        self, images: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        """∇θ of the batch-mean cross-entropy at ``images``, differentiable in the inputs.

        ``targets`` are class indices (int64) or class probabilities (soft labels);
        ``weights`` (positive, one per image) scale each example's loss: the clip factors
        ``min(1, C/‖g_i‖)`` of a clipped release, which the attack estimates.
        """
        if weights is None:
            loss = F.cross_entropy(self.model(images), targets)
        else:
            losses = F.cross_entropy(self.model(images), targets, reduction="none")
            loss = (weights * losses).mean()
        return torch.autograd.grad(loss, self.params, create_graph=True)


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


@dataclass(frozen=True)
class TotalVariation:
    """The regulariser α_TV·TV(x') of Geiping et al. 2020, eq. 4 (:func:`total_variation`)."""

    weight: float

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """α_TV·TV(``images``)."""
        return self.weight * total_variation(images)
