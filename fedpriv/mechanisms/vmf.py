"""``vmf``: the von Mises–Fisher mechanism — a noisy direction of the clipped sum.

privacy-math.md §2 (Algorithm 2 of Biswas et al.): clip each example in ℓ2, sum, normalise
``u = Σ ḡ_i / ‖Σ ḡ_i‖`` (a uniform random direction if the sum is 0), draw ``y ~ VMF(u, κ)``
over the whole flattened gradient (the smallest Rényi divergence, Prop. 3), release ``s·y``
with the public scale ``s`` (``vmf_scale``; default the sensitivity — ``C``, or ``sqrt(Σ C_r²)``
per layer — the largest norm a mean clipped gradient can have when ``B = L``).

One release satisfies ``κ·d₂``-privacy on the sphere, hence ``2κ``-LDP for any secret (§2,
§6); its RDP comes from :func:`fedpriv.accounting.rdp.vmf_rdp` (Prop. 1, §3), its Bayes
capacity from :func:`fedpriv.leakage.capacity.log_capacity_vmf` (§5) and its trade-off from
:func:`fedpriv.leakage.tradeoff.vmf_tradeoff` (§4). None of these depends on ``C``.

``vmf_keep_norm = true`` releases ``(‖Σ ḡ_i‖ / L)·y`` instead — the direction's noise with the
true norm of the mean clipped gradient. The norm is released without noise, so neighbouring
batches can be told apart with certainty: this variant has **no formal guarantee**, and its
RDP, LDP parameter and capacity are reported as infinite (trade-off ``f ≡ 0``).

References
----------
.. [1] M. Biswas et al., "Comparing privacy notions for protection against reconstruction
   attacks in machine learning", arXiv 2502.04045, Algorithm 2, Propositions 1–3.
.. [2] B. Weggenmann, F. Kerschbaum, "Differential privacy for directional data", CCS 2021.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fedpriv.mechanisms.base import ClippedMechanism, ParamValue
from fedpriv.mechanisms.parameters import read_flag, read_positive
from fedpriv.special.vmf_sampler import sample_uniform_direction, sample_vmf

if TYPE_CHECKING:
    import torch

__all__ = ["VMFMechanism"]


@dataclass(frozen=True)
class VMFMechanism(ClippedMechanism):
    """Clip in ℓ2, sum, release ``s·y`` with ``y ~ VMF(direction of the sum, κ)``."""

    kappa: float = 100.0
    vmf_scale: float | None = None  # None: the sensitivity C (resolved on construction)
    vmf_keep_norm: bool = False
    name = "vmf"

    @classmethod
    def from_params(cls, params: Mapping[str, Any], key_prefix: str) -> VMFMechanism:
        clipping = cls.read_clipping(params, key_prefix)
        scale = None
        if params.get("vmf_scale") is not None:
            scale = read_positive(params, "vmf_scale", 1.0, key_prefix)
        return cls(
            **clipping,
            kappa=read_positive(params, "kappa", 100.0, key_prefix),
            vmf_scale=scale,
            vmf_keep_norm=read_flag(params, "vmf_keep_norm", False, key_prefix),
        )

    def __post_init__(self) -> None:
        if self.vmf_scale is None:  # default public scale: the clipping bound
            object.__setattr__(self, "vmf_scale", self.sensitivity)

    def params(self) -> dict[str, ParamValue]:
        return {
            **super().params(),
            "kappa": self.kappa,
            "vmf_scale": self.vmf_scale,
            "vmf_keep_norm": self.vmf_keep_norm,
        }

    @property
    def formal_guarantee(self) -> bool:
        return not self.vmf_keep_norm

    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        norm = float(clipped_sum.norm())
        if not math.isfinite(norm):  # non-finite gradients propagate, as in the other mechanisms
            return clipped_sum.new_full(clipped_sum.shape, math.nan)
        if norm > 0:
            direction = clipped_sum / norm
        else:
            direction = sample_uniform_direction(
                clipped_sum.shape[0], generator, dtype=clipped_sum.dtype, device=clipped_sum.device
            )
        y = sample_vmf(direction, self.kappa, generator)
        return y * (norm / batch_size if self.vmf_keep_norm else self.vmf_scale)

    def rdp(self, orders: np.ndarray, dim: int) -> np.ndarray:
        if not self.formal_guarantee:
            return super().rdp(orders, dim)
        from fedpriv.accounting.rdp import vmf_rdp

        return vmf_rdp(orders, self.kappa, dim)

    def pure_ldp_epsilon(self, radius: float) -> float:
        if not self.formal_guarantee:
            return super().pure_ldp_epsilon(radius)
        from fedpriv.leakage.bayesian import vmf_mbp_bound

        return vmf_mbp_bound(self.kappa)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        if not self.formal_guarantee:
            return super().log_bayes_capacity(dim, radius)
        from fedpriv.leakage.capacity import log_capacity_vmf

        return log_capacity_vmf(dim, self.kappa)

    def tradeoff(self, alpha: np.ndarray, dim: int) -> np.ndarray:
        if not self.formal_guarantee:
            return super().tradeoff(alpha, dim)
        from fedpriv.leakage.tradeoff import vmf_tradeoff

        return vmf_tradeoff(alpha, self.kappa, dim)
