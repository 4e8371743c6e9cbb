"""Gradient sources: one batch's per-example gradients, as the mechanisms consume them.

A mechanism never asks how the gradients were computed; it asks its source for the sum it
releases — the raw sum ``Σ_i g_i`` (``none``) or the clipped sum ``Σ_i ḡ_i`` under its own
bounds and norm (every other mechanism; privacy-math.md §2). Two sources give the same sums:

* :class:`PerExampleGradients` holds the materialised ``(B, p)`` matrix (any model, through
  ``torch.func``; also what tests and benchmarks hand a mechanism directly);
* :class:`LinearFactorGradients` holds the rank-one factors of an all-linear model (the paper
  MLP) and forms the sums by ghost clipping, 5–10× faster on CPU, never forming ``(B, p)``.

:func:`gradient_source` picks one per model, explicitly, from its
:func:`~fedpriv.gradients.linear.parameter_layout` (``all_linear``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from fedpriv.gradients.clipping import clipped_sum, ghost_clipped_sum
from fedpriv.gradients.linear import (
    LayerRecorder,
    LinearFactors,
    ParameterLayout,
    linear_factors,
    materialise,
    parameter_layout,
)
from fedpriv.gradients.loss import Loss, cross_entropy
from fedpriv.gradients.vmap import vmap_per_example_gradients

__all__ = [
    "GradientSource", "LinearFactorGradients", "PerExampleGradients", "gradient_source",
    "per_example_gradients",
]


class GradientSource:
    """One batch's per-example gradients (``layer_sizes``: numel of each parameter, in order)."""

    layer_sizes: tuple[int, ...]
    losses: torch.Tensor

    def gradient_sum(self) -> torch.Tensor:
        """``Σ_i g_i``, shape ``(p,)``."""
        raise NotImplementedError

    def clipped_sum(self, bounds: Sequence[float], norm_ord: int) -> torch.Tensor:
        """``Σ_i ḡ_i``, shape ``(p,)``: one bound for flat clipping, or one per parameter."""
        raise NotImplementedError

    def per_example(self) -> torch.Tensor:
        """The ``(B, p)`` per-example gradients, materialised."""
        raise NotImplementedError


@dataclass(frozen=True)
class PerExampleGradients(GradientSource):
    """Materialised per-example gradients ``(B, p)`` (``B`` may be 0)."""

    grads: torch.Tensor
    losses: torch.Tensor | None = None
    layer_sizes: tuple[int, ...] = ()

    def gradient_sum(self) -> torch.Tensor:
        return self.grads.sum(dim=0)

    def per_example(self) -> torch.Tensor:
        return self.grads

    def clipped_sum(self, bounds: Sequence[float], norm_ord: int) -> torch.Tensor:
        sizes = None if len(bounds) == 1 else self.layer_sizes
        return clipped_sum(self.grads, list(bounds), sizes, norm_ord)


@dataclass(frozen=True)
class LinearFactorGradients(GradientSource):
    """The rank-one factors of an all-linear model's per-example gradients."""

    factors: LinearFactors
    layer_sizes: tuple[int, ...] = ()

    @property
    def losses(self) -> torch.Tensor:  # type: ignore[override]
        return self.factors.losses

    def gradient_sum(self) -> torch.Tensor:
        sums = [d.sum(dim=0) if a is None else (d.T @ a).reshape(-1)
                for d, a in zip(self.factors.errors, self.factors.inputs, strict=True)]
        return torch.cat(sums)

    def clipped_sum(self, bounds: Sequence[float], norm_ord: int) -> torch.Tensor:
        return ghost_clipped_sum(self.factors, list(bounds), norm_ord)

    def per_example(self) -> torch.Tensor:
        return materialise(self.factors)


def gradient_source(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: Loss = cross_entropy,
    *, layout: ParameterLayout | None = None, recorder: LayerRecorder | None = None,
) -> GradientSource:
    """The batch's gradient source of the per-example ``loss`` (cross-entropy by default):
    factors for an all-linear model, else ``vmap`` gradients.

    An empty batch (Poisson sampling can draw none) is a zero-row :class:`PerExampleGradients`:
    every sum is zero and the mechanism still adds its noise. ``layout``: ``model``'s
    :func:`~fedpriv.gradients.linear.parameter_layout`, when the caller walked the model once
    for several batches (:func:`fedpriv.training.local_train`); else one walk per batch.
    ``recorder``: an entered :class:`~fedpriv.gradients.linear.LayerRecorder` of an all-linear
    model's layers, when the caller records several batches (else one per batch).
    """
    layout = parameter_layout(model) if layout is None else layout
    sizes = layout.sizes
    if x.shape[0] == 0:
        return PerExampleGradients(x.new_zeros((0, sum(sizes))), x.new_zeros((0,)), sizes)
    if layout.all_linear:
        return LinearFactorGradients(
            linear_factors(model, x, y, loss, layout=layout, recorder=recorder), sizes)
    grads, losses = vmap_per_example_gradients(model, x, y, loss)
    return PerExampleGradients(grads, losses, sizes)


def per_example_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(B, p)`` per-example gradients and the losses, by the route of
    :func:`gradient_source` (column order ``model.parameters()``, each flattened row-major)."""
    source = gradient_source(model, x, y)
    return source.per_example(), source.losses
