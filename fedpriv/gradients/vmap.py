"""Per-example gradients of any model through ``torch.func.vmap(grad(...))``.

The route for models that are not all-linear (:func:`fedpriv.gradients.linear.is_all_linear`),
e.g. the small CNN: a functional call of the model per example, vectorised by ``vmap``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fedpriv.gradients.loss import Loss, cross_entropy

__all__ = ["vmap_per_example_gradients"]


def vmap_per_example_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: Loss = cross_entropy
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example gradients of ``loss`` (:mod:`fedpriv.gradients.loss`; cross-entropy by
    default), flattened to ``(B, p)``, and the losses.

    The column order is ``model.parameters()`` order, each parameter flattened row-major.
    """
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_one(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, p, (xi.unsqueeze(0),))
        return loss(logits, yi.unsqueeze(0)).sum()

    grads = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
    flat = torch.cat([grads[k].reshape(x.shape[0], -1) for k in params], dim=1)
    with torch.no_grad():
        losses = loss(model(x), y)
    return flat, losses
