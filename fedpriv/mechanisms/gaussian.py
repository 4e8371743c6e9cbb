"""``gaussian``: the Gaussian mechanism of DP-SGD.

privacy-math.md §2: release ``(Σ_i ḡ_i + N(0, σ²C² I)) / L``, ``ḡ_i`` clipped in ℓ2 to ``C``
(per layer: ``C = sqrt(Σ C_r²)``, the overall bound). One release is ``μ``-GDP with
``μ = 1/σ``; its RDP comes from :func:`fedpriv.accounting.rdp.gaussian_rdp` (§3), its Bayes
capacity from :func:`fedpriv.leakage.capacity.log_capacity_gaussian` (§5), its trade-off
function from :func:`fedpriv.leakage.tradeoff.gaussian_tradeoff` (§4). It has no finite pure
LDP parameter (§6).

References
----------
.. [1] M. Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, Algorithm 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fedpriv.mechanisms.base import ClippedMechanism, ParamValue
from fedpriv.mechanisms.parameters import read_nonnegative

if TYPE_CHECKING:
    import torch

__all__ = ["GaussianMechanism"]


@dataclass(frozen=True)
class GaussianMechanism(ClippedMechanism):
    """Clip in ℓ2, sum, add ``N(0, (σ·C)² I)``, divide by ``L``."""

    noise_multiplier: float = 1.0
    name = "gaussian"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], key_prefix: str) -> GaussianMechanism:
        sigma = read_nonnegative(params, "noise_multiplier", 1.0, key_prefix)
        return cls(**cls.read_clipping(params, key_prefix), noise_multiplier=sigma)

    def params(self) -> dict[str, ParamValue]:
        return {**super().params(), "noise_multiplier": self.noise_multiplier}

    @property
    def noise_std(self) -> float:
        """Standard deviation ``σ·C`` of the noise added to the sum."""
        return self.noise_multiplier * self.sensitivity

    @property
    def formal_guarantee(self) -> bool:
        return self.noise_multiplier > 0

    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        noise = clipped_sum.new_empty(clipped_sum.shape).normal_(generator=generator)
        return (clipped_sum + self.noise_std * noise) / batch_size

    def rdp(self, orders: np.ndarray, dim: int) -> np.ndarray:
        if not self.formal_guarantee:
            return super().rdp(orders, dim)
        from fedpriv.accounting.rdp import gaussian_rdp

        return gaussian_rdp(orders, self.noise_multiplier)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        if not self.formal_guarantee:
            return math.inf
        from fedpriv.leakage.capacity import log_capacity_gaussian

        return log_capacity_gaussian(dim, radius, self.noise_std)

    def tradeoff(self, alpha: np.ndarray, dim: int) -> np.ndarray:
        if not self.formal_guarantee:
            return super().tradeoff(alpha, dim)
        from fedpriv.leakage.tradeoff import gaussian_tradeoff

        return gaussian_tradeoff(alpha, 1.0 / self.noise_multiplier)
