"""``none``: the mean of the raw per-example gradients — the unprotected baseline.

privacy-math.md §2: release ``Σ_i g_i / L``. No clipping, no noise, no guarantee: its release
is :class:`~fedpriv.accounting.events.NoGuarantee` (infinite RDP, LDP parameter and Bayes
capacity, trade-off ``f ≡ 0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from fedpriv.accounting.events import NoGuarantee, Release
from fedpriv.mechanisms.base import Mechanism, check_batch_size

if TYPE_CHECKING:
    import torch

    from fedpriv.gradients import GradientSource
    from fedpriv.verification import ClientUpdate, Verdict

__all__ = ["NoMechanism"]


@dataclass(frozen=True)
class NoMechanism(Mechanism):
    """Release the plain mean gradient (sum divided by the expected batch size)."""

    name: ClassVar[str] = "none"
    label: ClassVar[str] = "no noise"

    @property
    def sensitivity(self) -> float:
        """Unbounded: nothing limits one example's contribution."""
        return math.inf

    def privatize(
        self, source: GradientSource, generator: torch.Generator, *, batch_size: float
    ) -> torch.Tensor:
        check_batch_size(batch_size)
        return source.gradient_sum() / batch_size

    def verify(self, update: ClientUpdate, alpha: float) -> Verdict:
        """Nothing is claimed, so nothing can be contradicted: ``unverifiable``."""
        from fedpriv.verification import verify_none

        return verify_none(update)

    def release(self, dim: int) -> Release:
        return NoGuarantee(self.name)
