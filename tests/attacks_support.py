"""Ground truth and honest-client views for the attack tests (not a test module itself)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attacks.view import ServerView
from fedpriv.data.datasets import upsample_digits
from fedpriv.models import build_model

SHAPE = (1, 16, 16)


def digits(indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn digits, bilinearly upsampled to 16×16 in [0, 1], and their labels."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = upsample_digits(bunch.images[indices])
    return x, torch.as_tensor(bunch.target[indices], dtype=torch.int64)


def fresh_params(seed: int, model_name: str = "paper-mlp") -> list[np.ndarray]:
    """A seeded initialisation θ, without touching the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model(model_name, SHAPE, 10)
    return [p.detach().numpy().copy() for p in model.parameters()]


def mean_gradient_view(
    images: torch.Tensor, labels: torch.Tensor, *, seed: int = 0, lr: float = 0.1
) -> ServerView:
    """View of one plain SGD step on the batch-mean cross-entropy (mechanism ``none``),
    computed directly with autograd — independently of fedpriv.training."""
    theta = fresh_params(seed)
    model = build_model("paper-mlp", SHAPE, 10)
    with torch.no_grad():
        for p, t in zip(model.parameters(), theta, strict=True):
            p.copy_(torch.from_numpy(t))
    loss = F.cross_entropy(model(images), labels)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    update = [-lr * g.numpy() for g in grads]
    return ServerView("paper-mlp", SHAPE, 10, theta, update, lr, float(len(labels)))
