"""Per-example gradient clipping, vectorised over the batch.

``ḡ_i = g_i / max(1, ‖g_i‖/C)`` (privacy-math.md §2; Abadi et al. 2016, Algorithm 1), in the ℓ2
norm (Gaussian, VMF, clip-only) or the ℓ1 norm (Laplace), either over the whole flattened
gradient or per layer (each block ``r`` to its own ``C_r``, overall bound ``‖(C_1, …, C_R)‖``
in the same norm). Examples whose norm is at most the bound are returned unchanged, bit for
bit. :func:`clipped_sum` forms ``Σ_i ḡ_i`` as one matrix–vector product without materialising
the clipped batch. torch is imported only inside the functions so that
``import fedpriv.mechanisms`` stays torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["clip_factors", "clip_flat", "clip_per_layer", "clipped_sum"]


def clip_factors(grads: Tensor, bound: float, norm_ord: int = 2) -> Tensor:
    """``min(1, C/‖g_i‖)`` for each row of ``grads`` (shape ``(B, p)``); 1 for zero rows.

    Parameters
    ----------
    grads
        Per-example flattened gradients, shape ``(B, p)``; ``B`` may be 0.
    bound
        Clipping bound ``C > 0``.
    norm_ord
        ``2`` for the ℓ2 norm, ``1`` for the ℓ1 norm.
    """
    import torch

    if norm_ord == 1:  # abs().sum() is several times faster than vector_norm(ord=1) on CPU
        norms = grads.abs().sum(dim=1)
    else:
        norms = torch.linalg.vector_norm(grads, ord=norm_ord, dim=1)
    return (bound / norms).clamp(max=1.0)


def clip_flat(grads: Tensor, bound: float, norm_ord: int = 2) -> Tensor:
    """Clip each row of ``grads`` (shape ``(B, p)``) to norm ``≤ bound``: ``g_i·clip_factors``."""
    return grads * clip_factors(grads, bound, norm_ord).unsqueeze(1)


def _check_layers(grads: Tensor, layer_sizes: Sequence[int], bounds: Sequence[float]) -> None:
    if len(layer_sizes) != len(bounds) or sum(layer_sizes) != grads.shape[1]:
        raise ValueError(
            f"clipping: {len(bounds)} bounds for layer sizes {list(layer_sizes)} "
            f"(sum must be the gradient width {grads.shape[1]})"
        )


def clip_per_layer(
    grads: Tensor, layer_sizes: Sequence[int], bounds: Sequence[float], norm_ord: int = 2
) -> Tensor:
    """Clip each layer block of each row of ``grads`` to its own bound ``C_r``.

    Parameters
    ----------
    grads
        Per-example flattened gradients, shape ``(B, p)``, layers concatenated in order.
    layer_sizes
        Number of parameters in each layer; they must sum to ``p``.
    bounds
        One clipping bound ``C_r > 0`` per layer.
    norm_ord
        ``2`` for the ℓ2 norm, ``1`` for the ℓ1 norm.

    Raises
    ------
    ValueError
        If the layer sizes do not match the bounds or the gradient width.
    """
    import torch

    _check_layers(grads, layer_sizes, bounds)
    blocks = grads.split(list(layer_sizes), dim=1)
    clipped = [clip_flat(b, c, norm_ord) for b, c in zip(blocks, bounds, strict=True)]
    return torch.cat(clipped, dim=1)


def clipped_sum(
    grads: Tensor,
    bounds: Sequence[float],
    layer_sizes: Sequence[int] | None = None,
    norm_ord: int = 2,
) -> Tensor:
    """``Σ_i ḡ_i``, shape ``(p,)``: flat clipping to ``bounds[0]`` when ``layer_sizes`` is None,
    else per-layer clipping (same checks as :func:`clip_per_layer`)."""
    import torch

    if layer_sizes is None:
        return clip_factors(grads, bounds[0], norm_ord) @ grads
    _check_layers(grads, layer_sizes, bounds)
    blocks = grads.split(list(layer_sizes), dim=1)
    sums = [clip_factors(b, c, norm_ord) @ b for b, c in zip(blocks, bounds, strict=True)]
    return torch.cat(sums)
