"""DP-SGD on one client (Abadi et al. 2016, Algorithm 1), generic over the noise mechanism.

Each local step samples a batch (Poisson with rate q = L/n, or a fixed-size batch of L drawn
without replacement), computes per-example gradients, hands them to the mechanism — which
clips, aggregates and adds noise, returning the released update of privacy-math.md §2 — and
steps ``θ ← θ − η · release``. Per-example gradients come from ``torch.func``
(``vmap(grad(...))``) for any model; for models made of linear layers (the paper MLP) they are
outer products of layer inputs and errors, and clipping mechanisms get the clipped sum by ghost
clipping without forming them (:mod:`fedpriv.training.linear_grads`) — the same release, 5–10×
faster on CPU.

The accounting in :mod:`fedpriv.accounting` assumes Poisson sampling; fixed-size batches are
offered for comparison with published code, and the report labels the sampling used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from fedpriv.training.linear_grads import (
    ghost_clipped_sum,
    linear_factors,
    linear_per_example_gradients,
)

if TYPE_CHECKING:
    from fedpriv.mechanisms import Mechanism

__all__ = [
    "LocalResult",
    "local_train",
    "per_example_gradients",
    "private_release",
    "sample_batch",
    "vmap_per_example_gradients",
]


@dataclass
class LocalResult:
    """What one client's local training did (numbers only; the model is updated in place)."""

    loss: float
    steps: int
    sample_rate: float
    batch_sizes: list[int] = field(default_factory=list)
    batch_indices: list[list[int]] = field(default_factory=list)


def per_example_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example gradients of the cross-entropy loss, flattened to ``(B, p)``, and the losses.

    The column order is ``model.parameters()`` order, each parameter flattened row-major.
    Models made only of linear layers (the paper MLP) take the outer-product route of
    :mod:`fedpriv.training.linear_grads` (≈ 5× faster on CPU, equal to ``vmap`` to 1e-6);
    any other model takes :func:`vmap_per_example_gradients`.
    """
    if x.shape[0] == 0:  # an empty Poisson batch: no gradients, and the mechanism adds noise
        p = sum(q.numel() for q in model.parameters())
        return x.new_zeros((0, p)), x.new_zeros((0,))
    try:
        return linear_per_example_gradients(model, x, y)
    except ValueError:
        return vmap_per_example_gradients(model, x, y)


def vmap_per_example_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`per_example_gradients` for any model, through ``torch.func.vmap(grad(...))``
    over a functional call of ``model``."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_one(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, p, (xi.unsqueeze(0),))
        return F.cross_entropy(logits, yi.unsqueeze(0))

    grads = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
    flat = torch.cat([grads[k].reshape(x.shape[0], -1) for k in params], dim=1)
    with torch.no_grad():
        losses = F.cross_entropy(model(x), y, reduction="none")
    return flat, losses


def sample_batch(
    n: int, batch_size: int, sampling: str, generator: torch.Generator
) -> torch.Tensor:
    """Indices of one batch: Poisson (each record with probability ``batch_size / n``) or a
    fixed-size draw without replacement."""
    if sampling == "poisson":
        q = min(1.0, batch_size / n)
        return torch.nonzero(torch.rand(n, generator=generator) < q).flatten()
    if sampling == "fixed":
        return torch.randperm(n, generator=generator)[: min(batch_size, n)]
    raise ValueError(f"unknown sampling {sampling!r}")


def private_release(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mechanism: Mechanism,
    generator: torch.Generator,
    *,
    batch_size: float,
    layer_sizes: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """The mechanism's release for the batch ``(x, y)``, and the per-example losses.

    A clipping mechanism on a model of linear layers gets ``Σ_i ḡ_i`` by ghost clipping
    (:func:`~fedpriv.training.linear_grads.ghost_clipped_sum`: per-example norms factorise, so the
    ``(B, p)`` gradients are never formed); everything else goes through
    :func:`per_example_gradients` and ``mechanism.privatize``. Both routes give the same release
    from the same generator (tested).
    """
    release_sum = getattr(mechanism, "release_sum", None)
    if release_sum is not None and x.shape[0] > 0:
        try:
            factors = linear_factors(model, x, y)
        except ValueError:  # not an all-linear model
            factors = None
        if factors is not None:
            mechanism.check_layers(layer_sizes)
            total = ghost_clipped_sum(factors, mechanism.clip_bounds, mechanism.norm_ord)
            return release_sum(total, generator, batch_size=batch_size), factors.losses.detach()
    grads, losses = per_example_gradients(model, x, y)
    release = mechanism.privatize(grads, generator, batch_size=batch_size, layer_sizes=layer_sizes)
    return release, losses


def _apply_update(model: nn.Module, update: torch.Tensor, lr: float) -> None:
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            k = p.numel()
            p.sub_(lr * update[offset : offset + k].view_as(p).to(p.dtype))
            offset += k


def local_train(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mechanism: Mechanism,
    *,
    lr: float,
    local_steps: int,
    batch_size: int,
    sampling: str,
    generator: torch.Generator,
    record_ids: Sequence[int] | None = None,
) -> LocalResult:
    """Run ``local_steps`` private SGD steps on ``(x, y)``, updating ``model`` in place.

    Parameters
    ----------
    record_ids
        Global ids of the rows of ``x`` (for ground truth in audit mode); defaults to row numbers.
    """
    n = x.shape[0]
    ids = torch.as_tensor(record_ids if record_ids is not None else range(n))
    layer_sizes = [p.numel() for p in model.parameters()]
    expected = min(batch_size, n)
    result = LocalResult(loss=0.0, steps=local_steps, sample_rate=expected / n)
    losses = []
    for _ in range(local_steps):
        idx = sample_batch(n, batch_size, sampling, generator)
        release, loss = private_release(
            model, x[idx], y[idx], mechanism, generator,
            batch_size=float(expected), layer_sizes=layer_sizes,
        )  # fmt: skip
        _apply_update(model, release, lr)
        losses.append(loss)
        result.batch_sizes.append(int(idx.numel()))
        result.batch_indices.append(ids[idx].tolist())
    all_losses = torch.cat(losses)
    result.loss = float(all_losses.mean()) if all_losses.numel() else float("nan")
    return result
