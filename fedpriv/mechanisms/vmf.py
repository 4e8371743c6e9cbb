"""``vmf``: the von Mises–Fisher mechanism — a noisy direction of the clipped sum.

privacy-math.md §2 (Algorithm 2 of Biswas et al.): clip each example in ℓ2, sum, normalise
``u = Σ ḡ_i / ‖Σ ḡ_i‖`` (a uniform random direction if the sum is 0), draw ``y ~ VMF(u, κ)``
over the whole flattened gradient (the smallest Rényi divergence, Prop. 3), release ``s·y``
with the public scale ``s`` (``vmf_scale``; default the sensitivity — ``C``, or ``sqrt(Σ C_r²)``
per layer — the largest norm a mean clipped gradient can have when ``B = L``).

One release satisfies ``κ·d₂``-privacy on the sphere, hence ``2κ``-LDP for any secret (§2,
§6); its RDP is Prop. 1 (:func:`fedpriv.accounting.rdp.vmf_rdp`, §3) amplified by Zhu & Wang's
bound, its PLD is built from the exact 1-D law of ``t = xᵀy``
(:func:`fedpriv.accounting.vmf_pld.vmf_pld`), its Bayes capacity is
:func:`fedpriv.leakage.capacity.log_capacity_vmf` (§5) and its trade-off
:func:`fedpriv.leakage.tradeoff.vmf_tradeoff` (§4). None of these depends on ``C``.

``vmf_keep_norm = true`` releases ``(‖Σ ḡ_i‖ / L)·y`` instead — the direction's noise with the
true norm of the mean clipped gradient. The norm is released without noise, so neighbouring
batches can be told apart with certainty: this variant has **no formal guarantee**.

References
----------
.. [1] M. Biswas et al., "Comparing privacy notions for protection against reconstruction
   attacks in machine learning", arXiv 2502.04045, Algorithm 2, Propositions 1–3.
.. [2] B. Weggenmann, F. Kerschbaum, "Differential privacy for directional data", CCS 2021.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedpriv.accounting.events import NoGuarantee, Release
from fedpriv.accounting.vmf_pld import DEFAULT_DISCRETIZATION as VMF_DISCRETIZATION
from fedpriv.mechanisms.base import CLIP_RANGE, MAX_KAPPA, ClippedMechanism, check_clip, param
from fedpriv.special.vmf_sampler import sample_uniform_direction, sample_vmf
from fedpriv.validate import check_dim, check_flag, check_positive

if TYPE_CHECKING:
    import torch

    from fedpriv.canaries import CanaryDesign
    from fedpriv.verification import ClientUpdate, Verdict
    from fedpriv.verification.observed import NoiseObservation

__all__ = ["VMFMechanism", "VMFRelease"]


@dataclass(frozen=True)
class VMFRelease(Release):
    """One VMF release with concentration ``κ > 0`` on the unit sphere of ``R^dim``."""

    kappa: float
    dim: int
    mechanism: ClassVar[str] = "vmf"
    parameter_name: ClassVar[str] = "kappa"
    more_noise: ClassVar[int] = -1
    parameter_help: ClassVar[str] = "VMF concentration kappa (needs --dim)"
    pld_discretization: ClassVar[float] = VMF_DISCRETIZATION  # privacy-math.md §3: keep it fine

    def __post_init__(self) -> None:
        check_positive("kappa", self.kappa)
        object.__setattr__(self, "dim", check_dim("dim", self.dim, minimum=2))

    @classmethod
    def calibration_start(cls, dim: int | None) -> VMFRelease:
        """κ = √p/2: the VMF that behaves like a Gaussian with σ ≈ 1 (privacy-math.md §2)."""
        p = check_dim("dim", dim, minimum=2)
        return cls(max(1.0, math.sqrt(p) / 2.0), p)

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        from fedpriv.accounting.rdp import vmf_rdp

        return vmf_rdp(orders, self.kappa, self.dim)

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        from fedpriv.accounting.vmf_pld import vmf_pld

        return vmf_pld(self.kappa, self.dim, sample_rate, discretization, steps=steps)

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        from fedpriv.accounting.vmf_pld import vmf_grid_need

        return vmf_grid_need(self.kappa, self.dim, sample_rate, steps)

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        from fedpriv.leakage.tradeoff import vmf_tradeoff

        return vmf_tradeoff(alpha, self.kappa, self.dim)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        """Secrets are directions: the capacity depends on neither ``radius`` nor ``C``."""
        from fedpriv.leakage.capacity import log_capacity_vmf

        return log_capacity_vmf(self.dim, self.kappa)

    def pure_ldp_epsilon(self, radius: float) -> float:
        from fedpriv.leakage.bayesian import vmf_mbp_bound

        return vmf_mbp_bound(self.kappa)

    def gaussian_equivalent(self, dim: int) -> float:
        """``√p/(2κ)``: the noise multiplier of the Gaussian it resembles for κ ≪ p (§2)."""
        return math.sqrt(self.dim) / (2.0 * self.kappa)


@dataclass(frozen=True)
class VMFMechanism(ClippedMechanism):
    """Clip in ℓ2, sum, release ``s·y`` with ``y ~ VMF(direction of the sum, κ)``."""

    kappa: float = param(100.0, partial(check_positive, maximum=MAX_KAPPA),
                         f"a number in (0, {MAX_KAPPA:g}]")
    vmf_scale: float | None = param(
        None, check_clip, f"a number in [{CLIP_RANGE[0]:g}, {CLIP_RANGE[1]:g}] (default: the "
        "clip bound)", optional=True,
    )
    vmf_keep_norm: bool = param(
        False, check_flag, "true or false (true releases the norm: no guarantee)"
    )
    name: ClassVar[str] = "vmf"
    label: ClassVar[str] = "VMF"
    additive: ClassVar[bool] = False  # a direction: canaries cannot be removed from it

    def __post_init__(self) -> None:
        if self.vmf_scale is None:  # default public scale: the clipping bound
            object.__setattr__(self, "vmf_scale", self.sensitivity)

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

    def verify(self, update: ClientUpdate, alpha: float) -> Verdict:
        """The released norm: ``s`` exactly for one step, at most ``k·s`` for ``k``."""
        from fedpriv.verification import verify_vmf

        return verify_vmf(update, scale=self.vmf_scale, clip_bound=self.sensitivity,
                          keep_norm=self.vmf_keep_norm, alpha=alpha)

    def observe(self, update: ClientUpdate) -> NoiseObservation | str:
        """Nothing: each step releases a direction of the fixed norm ``s``, and κ shapes only
        where it points, which one release cannot show against an unknown signal."""
        return ("not observable: a VMF release has a fixed norm; κ shapes only its direction, "
                "which one release cannot show against an unknown signal")

    def canary_scores(
        self, design: CanaryDesign, pseudo_gradient: np.ndarray, *, batch_size: float,
        steps: int,
    ) -> np.ndarray | None:
        """The first-order VMF log-likelihood ratios (:func:`fedpriv.canaries.vmf_scores`) of
        the released directions ``−Δ/η = s·Σ_t y_t`` (no divisor). Runs insert no canaries
        into VMF clients (not ``additive``); the library scores VMF releases all the same."""
        from fedpriv.canaries import vmf_scores

        return vmf_scores(design, pseudo_gradient, kappa=self.kappa, scale=self.vmf_scale)

    def pac_accuracy(self, beta: float, dim: int, batch_size: float) -> float | None:
        """``2s·sin(θ_{1−β}/2)`` between ``s·y`` and ``s·u``
        (:func:`fedpriv.leakage.robustness.vmf_accuracy`); None with ``vmf_keep_norm``, whose
        scale is the data's own norm, so no public radius exists."""
        from fedpriv.leakage.robustness import vmf_accuracy

        if self.vmf_keep_norm:
            return None
        return vmf_accuracy(beta, dim, self.kappa, self.vmf_scale)

    def release(self, dim: int) -> Release:
        if self.vmf_keep_norm:
            return NoGuarantee(self.name)
        return VMFRelease(self.kappa, dim)
