"""``clip``: the mean of the clipped per-example gradients — clipping alone, no noise.

privacy-math.md §2: release ``Σ_i ḡ_i / L`` with ``ḡ_i`` clipped in ℓ2 to ``C`` (or per
layer). Bounded sensitivity but deterministic, hence no guarantee: its release is
:class:`~fedpriv.accounting.events.NoGuarantee` (infinite RDP, LDP parameter and Bayes
capacity, trade-off ``f ≡ 0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from fedpriv.accounting.events import NoGuarantee, Release
from fedpriv.mechanisms.base import ClippedMechanism

if TYPE_CHECKING:
    import torch

    from fedpriv.verification import ClientUpdate, Verdict

__all__ = ["ClipMechanism"]


@dataclass(frozen=True)
class ClipMechanism(ClippedMechanism):
    """Release the mean clipped gradient."""

    name: ClassVar[str] = "clip"
    label: ClassVar[str] = "clip only"

    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        return clipped_sum / batch_size

    def verify(self, update: ClientUpdate, alpha: float) -> Verdict:
        """The clip bound: ``‖u‖ ≤ C·B``."""
        from fedpriv.verification import verify_clip

        return verify_clip(update, clip_bound=self.sensitivity, alpha=alpha)

    def pac_accuracy(self, beta: float, dim: int, batch_size: float) -> float:
        """0: the release *is* the clipped mean (clipping bias is not noise)."""
        return 0.0

    def release(self, dim: int) -> Release:
        return NoGuarantee(self.name)
