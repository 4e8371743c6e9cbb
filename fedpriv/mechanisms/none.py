"""``none``: the mean of the raw per-example gradients — the unprotected baseline.

privacy-math.md §2: release ``Σ_i g_i / L``. No clipping, no noise, no guarantee: the RDP,
LDP parameter and Bayes capacity are infinite and the trade-off function is ``f ≡ 0``
(inherited from :class:`~fedpriv.mechanisms.base.Mechanism`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fedpriv.mechanisms.base import Mechanism, ParamValue, check_batch_size

if TYPE_CHECKING:
    import torch

__all__ = ["NoMechanism"]


@dataclass(frozen=True)
class NoMechanism(Mechanism):
    """Release the plain mean gradient (sum divided by the expected batch size)."""

    name = "none"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], key_prefix: str) -> NoMechanism:
        return cls()

    def params(self) -> dict[str, ParamValue]:
        return {}

    @property
    def sensitivity(self) -> float:
        """Unbounded: nothing limits one example's contribution."""
        return math.inf

    def privatize(
        self,
        per_example_grads: torch.Tensor,
        generator: torch.Generator,
        *,
        batch_size: float,
        layer_sizes: Sequence[int] | None = None,
    ) -> torch.Tensor:
        check_batch_size(batch_size)
        return per_example_grads.sum(dim=0) / batch_size
