"""A simulated honest client: turn known records into the :class:`ServerView` of its update.

For tests, benchmarks and canary experiments, where the ground truth is known. The client
trains exactly as in a run (:func:`fedpriv.training.local_train`: per-example gradients, the
mechanism's privatisation, ``local_steps`` SGD steps on the whole given batch); only the
resulting view leaves this function, so an attack run on it sees what a server would see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from attacks.view import ServerView
from fedpriv.optimizer_settings import OptimizerSettings

__all__ = ["simulate_view"]


def simulate_view(
    model_name: str,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    num_classes: int = 10,
    mechanism: str = "none",
    mechanism_params: Mapping[str, Any] | None = None,
    learning_rate: float = 0.1,
    local_steps: int = 1,
    seed: int = 0,
    global_params: Sequence[np.ndarray] | None = None,
    optimizer: OptimizerSettings | None = None,
) -> ServerView:
    """The server's view of one client that trains on the batch ``(images, labels)``.

    Parameters
    ----------
    model_name
        Model zoo name.
    images, labels
        The client's batch ``(B, C, H, W)`` in [0, 1] and its int64 labels; every local step
        uses the whole batch (expected batch size L = B).
    mechanism, mechanism_params
        Noise mechanism (``fedpriv.mechanisms.build_mechanism``).
    learning_rate, local_steps
        Client SGD settings.
    seed
        Seeds the model initialisation (when ``global_params`` is None) and the mechanism.
    global_params
        Broadcast parameters θ; default a fresh initialisation from ``seed``.
    optimizer
        The local optimiser (declared in the view); None is plain SGD.
    """
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.models import build_model
    from fedpriv.training import local_train
    from fedpriv.training.optimizers import LocalOptimizer

    input_shape = tuple(int(d) for d in images.shape[1:])
    with torch.random.fork_rng(devices=[]):  # seeded init without touching the global RNG
        torch.manual_seed(seed)
        model = build_model(model_name, input_shape, num_classes)
    if global_params is not None:
        with torch.no_grad():
            for param, value in zip(model.parameters(), global_params, strict=True):
                param.copy_(torch.as_tensor(np.array(value)))
    theta = [p.detach().numpy().copy() for p in model.parameters()]
    mech = build_mechanism(mechanism, dict(mechanism_params or {}))
    generator = torch.Generator().manual_seed(seed)
    batch = images.shape[0]
    local_train(
        model,
        images,
        labels,
        mech,
        lr=learning_rate,
        local_steps=local_steps,
        batch_size=batch,
        sampling="fixed",
        generator=generator,
        optimizer=None if optimizer is None else LocalOptimizer(
            optimizer.name, optimizer.momentum, optimizer.nesterov, optimizer.weight_decay),
    )
    update = [p.detach().numpy() - t for p, t in zip(model.parameters(), theta, strict=True)]
    return ServerView(
        model_name=model_name,
        input_shape=input_shape,
        num_classes=num_classes,
        global_params=theta,
        update=update,
        learning_rate=learning_rate,
        batch_size=float(batch),
        local_steps=local_steps,
        mechanism=mech.name,
        mechanism_params=mech.params(),
        optimizer=optimizer,
    )
