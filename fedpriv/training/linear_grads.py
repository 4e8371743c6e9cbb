"""Per-example gradients of models made of linear layers, as outer products (no ``vmap``).

For a linear layer ``z = a Wᵀ + b`` applied to a batch, the gradient of example ``i``'s loss
``ℓ_i`` is ``∇_W ℓ_i = δ_i a_iᵀ`` and ``∇_b ℓ_i = δ_i``, where ``a_i`` is the layer's input row
and ``δ_i = ∂ℓ_i/∂z_i`` its back-propagated error; one forward pass and one backward pass of
``Σ_i ℓ_i`` give every ``a_i`` and ``δ_i`` (Goodfellow 2015). For a small MLP such as the paper
MLP this is an order of magnitude faster on CPU than ``torch.func.vmap(grad(...))``.

The norms of a rank-one block factorise, ``‖δ aᵀ‖₂ = ‖δ‖₂‖a‖₂`` and ``‖δ aᵀ‖₁ = ‖δ‖₁‖a‖₁``,
so the clipped sum ``Σ_i ḡ_i`` of privacy-math.md §2 can be formed without materialising the
``(B, p)`` per-example gradients ("ghost clipping": Goodfellow 2015; Lee & Kifer 2021;
Li et al. 2022): :func:`ghost_clipped_sum`.

Opacus offers the same computation through module hooks, but it is an optional dependency;
the math here is a few lines and is tested against ``vmap`` and against
:func:`fedpriv.mechanisms.clipping.clipped_sum` on the materialised gradients.

Scope: every trainable parameter must belong to an ``nn.Linear`` that is called exactly once
per forward pass on 2-D inputs ``(B, in)``, and examples must not interact (no batch norm).
Anything else raises ``ValueError`` (use :func:`fedpriv.training.per_example_gradients`).

References
----------
.. [1] I. Goodfellow, "Efficient Per-Example Gradient Computations", arXiv 1510.01799 (2015).
.. [2] J. Lee, D. Kifer, "Scaling up Differentially Private Deep Learning with Fast
   Per-Example Gradient Clipping", PoPETs 2021.
.. [3] X. Li et al., "Large Language Models Can Be Strong Differentially Private Learners",
   ICLR 2022 (ghost clipping).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LinearFactors", "ghost_clipped_sum", "linear_factors", "linear_per_example_gradients"]


@dataclass(frozen=True)
class LinearFactors:
    """The per-example factors of every trainable parameter, in ``model.parameters()`` order.

    Attributes
    ----------
    errors
        ``δ`` of the parameter's layer, shape ``(B, out)``, one entry per parameter.
    inputs
        The layer's input ``a``, shape ``(B, in)``, for a weight; ``None`` for a bias.
    losses
        Per-example cross-entropy losses, shape ``(B,)``.
    """

    errors: list[torch.Tensor]
    inputs: list[torch.Tensor | None]
    losses: torch.Tensor

    @property
    def widths(self) -> list[int]:
        """Number of gradient entries of each parameter (its ``numel``)."""
        return [
            d.shape[1] * (1 if a is None else a.shape[1])
            for d, a in zip(self.errors, self.inputs, strict=True)
        ]


def _linear_of_each_parameter(model: nn.Module) -> list[tuple[nn.Linear, str]]:
    """``(layer, "weight" | "bias")`` for each trainable parameter, in parameter order."""
    owner = {}
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            owner[id(param)] = (module, name)
    found = []
    for param in model.parameters():
        module, name = owner[id(param)]
        if not isinstance(module, nn.Linear):
            raise ValueError(f"linear_grads: parameter of {type(module).__name__} is not linear")
        found.append((module, name))
    return found


def linear_factors(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> LinearFactors:
    """Inputs ``a`` and errors ``δ = ∂ℓ_i/∂z_i`` of every linear layer, and the losses."""
    params = _linear_of_each_parameter(model)
    layers = list(dict.fromkeys(module for module, _ in params))
    seen: dict[nn.Linear, list[tuple[torch.Tensor, torch.Tensor]]] = {m: [] for m in layers}

    def keep(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
        seen[module].append((args[0].detach(), out))

    hooks = [m.register_forward_hook(keep) for m in layers]
    try:
        losses = F.cross_entropy(model(x), y, reduction="none")
    finally:
        for hook in hooks:
            hook.remove()
    for calls in seen.values():
        if len(calls) != 1 or calls[0][0].dim() != 2:
            raise ValueError("linear_grads: each linear layer must run once, on (B, in) inputs")
    outputs = [seen[m][0][1] for m in layers]
    errors = dict(zip(layers, torch.autograd.grad(losses.sum(), outputs), strict=True))
    return LinearFactors(
        errors=[errors[m] for m, _ in params],
        inputs=[seen[m][0][0] if name == "weight" else None for m, name in params],
        losses=losses.detach(),
    )


def linear_per_example_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop-in for :func:`fedpriv.training.per_example_gradients`: ``(B, p)`` and the losses.

    Same column order (``model.parameters()``, each flattened row-major); each weight block
    is the outer product ``δ_i a_iᵀ``, written straight into one preallocated matrix.
    """
    factors = linear_factors(model, x, y)
    batch = factors.losses.shape[0]
    out = factors.losses.new_empty((batch, sum(factors.widths)))
    offset = 0
    for d, a, width in zip(factors.errors, factors.inputs, factors.widths, strict=True):
        block = out[:, offset : offset + width]
        if a is None:
            block.copy_(d)
        else:
            torch.mul(d.unsqueeze(2), a.unsqueeze(1), out=block.view(batch, d.shape[1], -1))
        offset += width
    return out, factors.losses


def _block_norms(factors: LinearFactors, norm_ord: int) -> torch.Tensor:
    """``‖g_i^(k)‖`` of every example ``i`` and parameter block ``k``, shape ``(B, K)``."""
    norms = []
    for d, a in zip(factors.errors, factors.inputs, strict=True):
        n = torch.linalg.vector_norm(d, ord=norm_ord, dim=1)
        norms.append(n if a is None else n * torch.linalg.vector_norm(a, ord=norm_ord, dim=1))
    return torch.stack(norms, dim=1)


def ghost_clipped_sum(
    factors: LinearFactors, bounds: Sequence[float], norm_ord: int = 2
) -> torch.Tensor:
    """``Σ_i ḡ_i`` (shape ``(p,)``) without materialising the per-example gradients.

    Parameters
    ----------
    factors
        From :func:`linear_factors`.
    bounds
        One bound ``[C]`` for flat clipping over the whole gradient, or one ``C_k`` per
        parameter (per-layer clipping, as ``clip_per_layer`` with ``layer_sizes`` = the
        parameter sizes).
    norm_ord
        ``2`` (Gaussian, VMF, clip) or ``1`` (Laplace).
    """
    block = _block_norms(factors, norm_ord)
    if len(bounds) == 1:
        total = block.pow(norm_ord).sum(dim=1).pow(1.0 / norm_ord)
        scale = (bounds[0] / total).clamp(max=1.0).unsqueeze(1).expand_as(block)
    elif len(bounds) == block.shape[1]:
        scale = (block.new_tensor(list(bounds)) / block).clamp(max=1.0)
    else:
        raise ValueError(f"ghost_clipped_sum: {len(bounds)} bounds for {block.shape[1]} blocks")
    sums = []
    for k, (d, a) in enumerate(zip(factors.errors, factors.inputs, strict=True)):
        weighted = d * scale[:, k : k + 1]
        sums.append(weighted.sum(dim=0) if a is None else (weighted.T @ a).reshape(-1))
    return torch.cat(sums)
