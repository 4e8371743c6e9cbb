"""``clip``: the mean of the clipped per-example gradients — clipping alone, no noise.

privacy-math.md §2: release ``Σ_i ḡ_i / L`` with ``ḡ_i`` clipped in ℓ2 to ``C`` (or per
layer). Bounded sensitivity but deterministic, hence no guarantee: infinite RDP, LDP
parameter and Bayes capacity, trade-off ``f ≡ 0`` (inherited from
:class:`~fedpriv.mechanisms.base.Mechanism`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fedpriv.mechanisms.base import ClippedMechanism

if TYPE_CHECKING:
    import torch

__all__ = ["ClipMechanism"]


@dataclass(frozen=True)
class ClipMechanism(ClippedMechanism):
    """Release the mean clipped gradient."""

    name = "clip"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], key_prefix: str) -> ClipMechanism:
        return cls(**cls.read_clipping(params, key_prefix))

    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        return clipped_sum / batch_size
