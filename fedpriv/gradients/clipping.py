"""Per-example gradient clipping, vectorised over the batch.

``ḡ_i = g_i / max(1, ‖g_i‖/C)`` (privacy-math.md §2; Abadi et al. 2016, Algorithm 1), in the ℓ2
norm (Gaussian, VMF, clip-only) or the ℓ1 norm (Laplace), either over the whole flattened
gradient or per layer (each block ``r`` to its own ``C_r``, overall bound ``‖(C_1, …, C_R)‖``
in the same norm). Examples whose norm is at most the bound are returned unchanged, bit for
bit. Two routes to the clipped sum ``Σ_i ḡ_i``, the only place clipping is computed:

* :func:`clipped_sum` on materialised per-example gradients ``(B, p)``, as one matrix–vector
  product without forming the clipped batch;
* :func:`ghost_clipped_sum` on the rank-one factors of linear layers
  (:mod:`fedpriv.gradients.linear`), whose per-example norms factorise, so the ``(B, p)``
  gradients are never formed (ghost clipping: Goodfellow 2015; Lee & Kifer 2021; Li et al. 2022).

Which bound and norm apply is the mechanism's choice (:class:`fedpriv.mechanisms.ClippedMechanism`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from fedpriv.gradients.linear import LinearFactors

__all__ = ["clip_factors", "clip_flat", "clip_per_layer", "clipped_sum", "ghost_clipped_sum"]


@lru_cache(maxsize=64)
def _numerator(bound: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``bound`` as a 0-dim tensor, made once per dtype and device: the numerator of
    ``torch.div(C, norms)``. A Python number there is wrapped into a new tensor at every call
    (≈ 1 µs alone, ≈ 2–7 µs inside a DP step of the paper MLP); the quotient is the same
    correctly rounded one (``C`` is converted to the norms' dtype either way). Never written to."""
    import torch

    return torch.tensor(bound, dtype=dtype, device=device)


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
    # torch.div, not ``bound / norms``: torch evaluates a scalar over a tensor as
    # ``reciprocal(norms) * bound``, which is not correctly rounded (a row at exactly the bound
    # would be scaled by 1 - 2^-53 instead of being left as it is)
    return torch.div(_numerator(bound, norms.dtype, norms.device), norms).clamp(max=1.0)


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


def ghost_clipped_sum(
    factors: LinearFactors, bounds: Sequence[float], norm_ord: int = 2
) -> torch.Tensor:
    """``Σ_i ḡ_i`` (shape ``(p,)``) without materialising the per-example gradients.

    The block norms factorise (ghost norms: ``‖δ_i a_iᵀ‖ = ‖δ_i‖‖a_i‖`` in ℓ1 and ℓ2,
    ``‖δ_i‖`` for a bias), each example's factor ``min(1, C/‖g_i‖)`` weights its error rows,
    and each weight block is one product ``(s ⊙ δ)ᵀ a`` written into its slice of the result
    (one ``split`` of it, no per-block copies). A layer's weight and bias share ``δ``: under
    flat clipping (one factor per example for every block) its norm and its weighted rows are
    formed once for both. A factor is 1 exactly for an example within the bound (``torch.div``,
    as in :func:`clip_factors`), so its rows enter unchanged.

    Parameters
    ----------
    factors
        From :func:`fedpriv.gradients.linear.linear_factors`.
    bounds
        One bound ``[C]`` for flat clipping over the whole gradient, or one ``C_k`` per
        parameter (per-layer clipping, as ``clip_per_layer`` with ``layer_sizes`` = the
        parameter sizes).
    norm_ord
        ``2`` (Gaussian, VMF, clip) or ``1`` (Laplace).
    """
    import torch

    vector_norm = torch.linalg.vector_norm
    errors, inputs = factors.errors, factors.inputs
    if len(bounds) not in (1, len(errors)):
        raise ValueError(f"ghost_clipped_sum: {len(bounds)} bounds for {len(errors)} blocks")
    error_norms: dict[int, torch.Tensor] = {}  # by id: a layer's weight and bias share δ
    block = []
    for d, a in zip(errors, inputs, strict=True):
        n = error_norms.get(id(d))
        if n is None:
            n = error_norms[id(d)] = vector_norm(d, ord=norm_ord, dim=1)
        block.append(n if a is None else vector_norm(a, ord=norm_ord, dim=1).mul_(n))
    norms = torch.stack(block, dim=1)
    if len(bounds) == 1:
        total = vector_norm(norms, ord=norm_ord, dim=1, keepdim=True)
        scale = torch.div(_numerator(bounds[0], total.dtype, total.device), total).clamp_(max=1.0)
        weighted: dict[int, torch.Tensor] = {}  # δ ⊙ s, once per layer
        rows = []
        for d in errors:
            w = weighted.get(id(d))
            if w is None:
                w = weighted[id(d)] = d * scale
            rows.append(w)
    else:
        scales = torch.div(norms.new_tensor(list(bounds)), norms).clamp_(max=1.0)
        rows = [d * s for d, s in zip(errors, scales.split(1, dim=1), strict=True)]
    widths = factors.widths
    out = norms.new_empty(sum(widths))
    for w, a, part in zip(rows, inputs, out.split(widths), strict=True):
        if a is None:
            torch.sum(w, dim=0, out=part)
        else:
            torch.mm(w.T, a, out=part.view(w.shape[1], a.shape[1]))
    return out
