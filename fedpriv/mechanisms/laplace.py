"""``laplace``: per-coordinate Laplace noise on the ℓ1-clipped sum.

privacy-math.md §2: release ``(Σ_i ḡ_i + Lap(0, b)^p) / L`` with ``ḡ_i`` clipped in ℓ1 to
``C`` (per layer: ``C = Σ C_r``) and ``b = λ·C``. One release is ``1/λ``-DP (pure), so for
secrets within ℓ1 radius ``r`` the LDP parameter is ``r/b`` (§6); RDP from
:func:`fedpriv.accounting.rdp.laplace_rdp` (Mironov 2017, §3), Bayes capacity from
:func:`fedpriv.leakage.capacity.log_capacity_laplace` (§5), trade-off from
:func:`fedpriv.leakage.tradeoff.laplace_tradeoff` with ``μ = 1/λ`` (§4).

Laplace variates are drawn as ``b·(E₁ − E₂)`` with ``E₁, E₂`` independent standard
exponentials (an exact representation), ``E = −log(1 − U)`` from float64 uniforms
``U ∈ [0, 1)``: never infinite, and ~3× faster than ``Tensor.exponential_`` on CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedpriv.mechanisms.base import ClippedMechanism, ParamValue
from fedpriv.mechanisms.parameters import read_positive

if TYPE_CHECKING:
    import torch

__all__ = ["LaplaceMechanism"]


@dataclass(frozen=True)
class LaplaceMechanism(ClippedMechanism):
    """Clip in ℓ1, sum, add ``Lap(0, λ·C)`` to each coordinate, divide by ``L``."""

    laplace_scale: float = 1.0
    name = "laplace"
    norm_ord: ClassVar[int] = 1

    @classmethod
    def from_params(cls, params: Mapping[str, Any], key_prefix: str) -> LaplaceMechanism:
        scale = read_positive(params, "laplace_scale", 1.0, key_prefix)
        return cls(**cls.read_clipping(params, key_prefix), laplace_scale=scale)

    def params(self) -> dict[str, ParamValue]:
        return {**super().params(), "laplace_scale": self.laplace_scale}

    @property
    def noise_scale(self) -> float:
        """Laplace scale ``b = λ·C`` of the noise added to the sum."""
        return self.laplace_scale * self.sensitivity

    @property
    def formal_guarantee(self) -> bool:
        return True

    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        import torch

        shape = (2, *clipped_sum.shape)
        uniform = torch.rand(
            shape, generator=generator, dtype=torch.float64, device=clipped_sum.device
        )
        minus_exp = torch.log1p(-uniform)  # −E₁, −E₂
        noise = (minus_exp[1] - minus_exp[0]).to(clipped_sum.dtype)
        return (clipped_sum + self.noise_scale * noise) / batch_size

    def rdp(self, orders: np.ndarray, dim: int) -> np.ndarray:
        from fedpriv.accounting.rdp import laplace_rdp

        return laplace_rdp(orders, self.laplace_scale)

    def pure_ldp_epsilon(self, radius: float) -> float:
        """LDP parameter over the ℓ1 ball of radius ``r``: ``2r/b`` (two secrets can be 2r apart).

        Not the add/remove DP parameter ``C/b = 1/λ`` the accountant uses: see
        :func:`fedpriv.leakage.bayesian.laplace_mbp_bound`.
        """
        from fedpriv.leakage.bayesian import laplace_mbp_bound

        return laplace_mbp_bound(radius, self.noise_scale)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        from fedpriv.leakage.capacity import log_capacity_laplace

        return log_capacity_laplace(dim, radius, self.noise_scale)

    def tradeoff(self, alpha: np.ndarray, dim: int) -> np.ndarray:
        from fedpriv.leakage.tradeoff import laplace_tradeoff

        return laplace_tradeoff(alpha, 1.0 / self.laplace_scale)
