"""DP-SGD on one client (Abadi et al. 2016, Algorithm 1), generic over the noise mechanism.

Each local step samples a batch (Poisson with rate q = L/n, or a fixed-size batch of L drawn
without replacement), forms the batch's gradient source (:func:`fedpriv.gradients.gradient_source`:
rank-one factors for an all-linear model such as the paper MLP, ``torch.func`` per-example
gradients otherwise), hands it to the mechanism — which clips, aggregates and adds noise,
returning the released update of privacy-math.md §2 — and hands the release to the local
optimiser as ``p.grad`` (:class:`fedpriv.training.optimizers.LocalOptimizer`: plain SGD
``θ ← θ − η · release`` by default, or SGD with momentum / weight decay, Adam or AdamW, applied
after the noise as Opacus does; created afresh every round).

The accounting in :mod:`fedpriv.accounting` assumes Poisson sampling; fixed-size batches are
offered for comparison with published code, and the report labels the sampling used.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import nn

from fedpriv.gradients import CanaryGradients, Loss, cross_entropy, gradient_source
from fedpriv.gradients.linear import LayerRecorder, ParameterLayout, parameter_layout
from fedpriv.protocol import sampling_rate
from fedpriv.training.optimizers import LocalOptimizer

if TYPE_CHECKING:
    from fedpriv.mechanisms import Mechanism

__all__ = ["LocalResult", "local_train", "private_release", "sample_batch", "sampling_rate"]


@dataclass
class LocalResult:
    """What one client's local training did (numbers only; the model is updated in place)."""

    loss: float
    steps: int
    sample_rate: float
    batch_sizes: list[int] = field(default_factory=list)
    batch_indices: list[list[int]] = field(default_factory=list)
    releases: list[torch.Tensor] = field(default_factory=list)  # per step, with keep_releases


def sample_batch(
    n: int, batch_size: int, sampling: str, generator: torch.Generator
) -> torch.Tensor:
    """Indices of one batch, on the generator's device: Poisson (each record with probability
    ``batch_size / n``) or a fixed-size draw without replacement."""
    device = generator.device
    if sampling == "poisson":
        q = sampling_rate(n, batch_size)
        return torch.nonzero(torch.rand(n, generator=generator, device=device) < q).flatten()
    if sampling == "fixed":
        return torch.randperm(n, generator=generator, device=device)[: min(batch_size, n)]
    raise ValueError(f"unknown sampling {sampling!r}")


def private_release(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    mechanism: Mechanism,
    generator: torch.Generator,
    *,
    batch_size: float,
    canaries: torch.Tensor | None = None,
    loss: Loss = cross_entropy,
    layout: ParameterLayout | None = None,
    recorder: LayerRecorder | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The mechanism's release for the batch ``(x, y)`` (with ``canaries`` added to its sum),
    and the per-example losses (``loss``: :mod:`fedpriv.gradients.loss`). ``layout``:
    ``model``'s :func:`~fedpriv.gradients.linear.parameter_layout`, walked once, and
    ``recorder``: its layers' entered recorder (all-linear models), held by a caller that takes
    several steps (:func:`gradient_source`)."""
    source = gradient_source(model, x, y, loss, layout=layout, recorder=recorder)
    if canaries is not None:
        source = CanaryGradients(source, canaries)
    release = mechanism.privatize(source, generator, batch_size=batch_size)
    return release, source.losses.detach()


def _flat(params: list[nn.Parameter]) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in params])


def _set_gradients(params: list[nn.Parameter], update: torch.Tensor) -> None:
    """``p.grad`` of every parameter from the flat ``update`` (what Opacus's ``DPOptimizer``
    leaves in ``p.grad`` before the wrapped optimiser steps)."""
    offset = 0
    for p in params:
        k = p.numel()
        p.grad = update[offset : offset + k].view_as(p).to(p.dtype)
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
    proximal_mu: float = 0.0,
    optimizer: LocalOptimizer | None = None,
    canaries: torch.Tensor | None = None,
    loss: Loss = cross_entropy,
    keep_releases: bool = False,
) -> LocalResult:
    """Run ``local_steps`` private SGD steps on ``(x, y)``, updating ``model`` in place.

    ``model``, ``x``, ``y`` and ``generator`` share one device (:mod:`fedpriv.devices`), where
    every step runs; ``record_ids`` stay on the CPU.

    Parameters
    ----------
    record_ids
        Global ids of the rows of ``x`` (for ground truth in audit mode); defaults to row numbers.
    proximal_mu
        FedProx's ``μ`` (Li et al., MLSys 2020, Eq. 2): each step adds the gradient
        ``μ(θ − θ_round)`` of the proximal term ``(μ/2)‖θ − θ_round‖²`` to the release. It does
        not depend on the data, so adding it after the noise is post-processing: the privacy of
        the release is unchanged. (Zero at the first step: one local step is plain DP-SGD.)
    optimizer
        The local optimiser that steps on each release (default plain SGD at ``lr``), created
        afresh for this call — one round — as :mod:`fedpriv.training.optimizers` explains.
    canaries
        The round's in-canary sum, added to the clipped sum of every step (privacy-math.md
        §10; :func:`fedpriv.canaries.canary_sum`).
    loss
        The per-example loss (:mod:`fedpriv.gradients.loss`; cross-entropy by default).
    keep_releases
        Keep every step's release (flat, in the parameters' dtype, without the proximal
        term) in :attr:`LocalResult.releases`: what a client sends in steps mode
        (``audit.release = "steps"``; fedpriv/verification/steps.py).
    """
    n = x.shape[0]
    ids = torch.arange(n) if record_ids is None else torch.as_tensor(record_ids)
    layout = parameter_layout(model)  # one walk of the model per call, not per step
    params = [p for _, _, p in layout.owners]  # model.parameters(), in its order
    mechanism.check_layers([p.numel() for p in params])
    expected = min(batch_size, n)
    result = LocalResult(loss=0.0, steps=local_steps, sample_rate=sampling_rate(n, batch_size))
    losses = []
    anchor = _flat(params) if proximal_mu else None
    stepper = (optimizer or LocalOptimizer()).build(params, lr)
    # an all-linear model's layers are recorded for the whole call, not wrapped at every step
    with LayerRecorder(layout.layers) if layout.all_linear else nullcontext() as recorder:
        for _ in range(local_steps):
            idx = sample_batch(n, batch_size, sampling, generator)
            release, batch_losses = private_release(
                model, x[idx], y[idx], mechanism, generator, batch_size=float(expected),
                canaries=canaries, loss=loss, layout=layout, recorder=recorder,
            )
            if keep_releases:
                result.releases.append(release.detach().to(params[0].dtype).clone())
            if anchor is not None:
                release = release + proximal_mu * (_flat(params) - anchor)
            _set_gradients(params, release)
            stepper.step()
            losses.append(batch_losses)
            result.batch_sizes.append(int(idx.numel()))
            result.batch_indices.append(ids[idx.cpu()].tolist())
    all_losses = torch.cat(losses)
    result.loss = float(all_losses.mean()) if all_losses.numel() else float("nan")
    return result
