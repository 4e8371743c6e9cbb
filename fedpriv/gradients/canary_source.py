"""A batch's gradients with the round's in-canaries added (privacy-math.md §10).

:class:`CanaryGradients` wraps any :class:`~fedpriv.gradients.GradientSource` so that the
mechanism's sum is ``Σ_i ḡ_i + Σ_{j in} c_j``: the canaries are extra records whose clipped
gradients are fixed in advance (each of norm at most the mechanism's sensitivity, so not
clipped again), added in every local step before the noise. The divisor stays the expected
batch size ``L`` with learning rate ``η`` — the same update as ``L' = L + m/2`` with
``η·L'/L`` (:func:`fedpriv.canaries.augmented_batch_size`) — never the realised number of
in-canaries, which would reveal the secret bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fedpriv.gradients.source import GradientSource

__all__ = ["CanaryGradients"]


@dataclass(frozen=True)
class CanaryGradients(GradientSource):
    """``inner``'s sums plus ``canaries`` (the ``(p,)`` in-canary sum of
    :func:`fedpriv.canaries.canary_sum`). Per-example rows are not offered: the canaries are
    not examples of the batch, and no mechanism asks for rows."""

    inner: GradientSource
    canaries: torch.Tensor

    @property
    def layer_sizes(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.inner.layer_sizes

    @property
    def losses(self) -> torch.Tensor:  # type: ignore[override]
        return self.inner.losses

    def gradient_sum(self) -> torch.Tensor:
        total = self.inner.gradient_sum()
        return total + self.canaries.to(device=total.device, dtype=total.dtype)

    def clipped_sum(self, bounds: Sequence[float], norm_ord: int) -> torch.Tensor:
        total = self.inner.clipped_sum(bounds, norm_ord)
        return total + self.canaries.to(device=total.device, dtype=total.dtype)
