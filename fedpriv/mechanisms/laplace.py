"""``laplace``: per-coordinate Laplace noise on the ℓ1-clipped sum.

privacy-math.md §2: release ``(Σ_i ḡ_i + Lap(0, b)^p) / L`` with ``ḡ_i`` clipped in ℓ1 to
``C`` (per layer: ``C = Σ C_r``) and ``b = λ·C``. One release is ``1/λ``-DP (pure); its RDP is
Mironov's closed form (:func:`fedpriv.accounting.rdp.laplace_rdp`, §3) amplified by Zhu & Wang's
bound, its PLD dp-accounting's, its Bayes capacity
:func:`fedpriv.leakage.capacity.log_capacity_laplace` (§5), its trade-off
:func:`fedpriv.leakage.tradeoff.laplace_tradeoff` with ``μ = 1/λ`` (§4), and for secrets in the
ℓ1 ball of radius ``r`` its LDP parameter is ``2r/b`` (§6).

Laplace variates are drawn as ``b·(E₁ − E₂)`` with ``E₁, E₂`` independent standard
exponentials (an exact representation), ``E = −log(1 − U)`` from float64 uniforms
``U ∈ [0, 1)``: never infinite, and ~3× faster than ``Tensor.exponential_`` on CPU.

References
----------
.. [1] I. Mironov, "Rényi differential privacy", CSF 2017, Table II.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedpriv.accounting.events import Release
from fedpriv.mechanisms.base import MAX_NOISE, MIN_NOISE, ClippedMechanism, param
from fedpriv.validate import check_in_range, check_positive

if TYPE_CHECKING:
    import torch

    from fedpriv.canaries import CanaryDesign
    from fedpriv.verification import ClientUpdate, Verdict
    from fedpriv.verification.observed import NoiseObservation

__all__ = ["LaplaceMechanism", "LaplaceRelease"]


@dataclass(frozen=True)
class LaplaceRelease(Release):
    """One release with Laplace scale ``λ = b/C > 0`` (noise scale over the ℓ1 sensitivity)."""

    laplace_scale: float
    mechanism: ClassVar[str] = "laplace"
    parameter_name: ClassVar[str] = "laplace_scale"
    spec_names: ClassVar[dict[str, str]] = {"scale": "laplace_scale"}
    absolute_noise: ClassVar[str] = "laplace_scale"
    parameter_help: ClassVar[str] = "Laplace lambda = b / C: noise scale over the l1 clip bound"

    def __post_init__(self) -> None:
        check_positive("laplace_scale", self.laplace_scale)

    @classmethod
    def calibration_start(cls, dim: int | None) -> LaplaceRelease:
        return cls(1.0)

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        from fedpriv.accounting.rdp import laplace_rdp

        return laplace_rdp(orders, self.laplace_scale)

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        from fedpriv.accounting.dp_library import laplace_pld

        return laplace_pld(self.laplace_scale, sample_rate, discretization, steps=steps)

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        from fedpriv.accounting.dp_library import laplace_grid_need

        return laplace_grid_need(self.laplace_scale, sample_rate, steps)

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        from fedpriv.leakage.tradeoff import laplace_tradeoff

        return laplace_tradeoff(alpha, 1.0 / self.laplace_scale)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        from fedpriv.leakage.capacity import log_capacity_laplace

        return log_capacity_laplace(dim, radius, self.laplace_scale)

    def pure_ldp_epsilon(self, radius: float) -> float:
        """``2r/b`` over the ℓ1 ball of radius ``r`` (two secrets can be ``2r`` apart) — not the
        add/remove DP parameter ``1/λ`` the accountant uses
        (:func:`fedpriv.leakage.bayesian.laplace_mbp_bound`)."""
        from fedpriv.leakage.bayesian import laplace_mbp_bound

        return laplace_mbp_bound(radius, self.laplace_scale)

    def doubled(self) -> LaplaceRelease:
        """The same release at twice the sensitivity: λ/2."""
        return LaplaceRelease(self.laplace_scale / 2.0)

    @property
    def noise_law(self) -> tuple[str, float]:
        return "laplace", self.laplace_scale


@dataclass(frozen=True)
class LaplaceMechanism(ClippedMechanism):
    """Clip in ℓ1, sum, add ``Lap(0, λ·C)`` to each coordinate, divide by ``L``."""

    laplace_scale: float = param(1.0, partial(check_in_range, low=MIN_NOISE, high=MAX_NOISE),
                                 f"a number in [{MIN_NOISE:g}, {MAX_NOISE:g}]")
    name: ClassVar[str] = "laplace"
    label: ClassVar[str] = "Laplace"
    norm_ord: ClassVar[int] = 1

    @property
    def noise_scale(self) -> float:
        """Laplace scale ``b = λ·C`` of the noise added to the sum."""
        return self.laplace_scale * self.sensitivity

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

    def verify(self, update: ClientUpdate, alpha: float) -> Verdict:
        """The ℓ1 noise-norm sandwich and the noise-law test."""
        from fedpriv.verification import verify_laplace

        return verify_laplace(update, laplace_scale=self.laplace_scale,
                              clip_bound=self.sensitivity, alpha=alpha)

    def observe(self, update: ClientUpdate) -> NoiseObservation | str:
        """The ℓ1 norm of the noisy sum (:func:`fedpriv.verification.observed.observe_laplace`)."""
        from fedpriv.verification.observed import observe_laplace

        return observe_laplace(update, clip_bound=self.sensitivity,
                               laplace_scale=self.laplace_scale)

    def canary_scores(
        self, design: CanaryDesign, pseudo_gradient: np.ndarray, *, batch_size: float,
        steps: int,
    ) -> np.ndarray | None:
        """The Laplace log-likelihood ratios (:func:`fedpriv.canaries.laplace_scores`)."""
        from fedpriv.canaries import laplace_scores

        return laplace_scores(design, batch_size * pseudo_gradient,
                              noise_scale=self.noise_scale, steps=steps)

    def pac_accuracy(self, beta: float, dim: int, batch_size: float) -> float:
        """``λC·Γ_p⁻¹(1 − β)/L`` in ℓ1, the norm of its sensitivity
        (:func:`fedpriv.leakage.robustness.laplace_accuracy`)."""
        from fedpriv.leakage.robustness import laplace_accuracy

        return laplace_accuracy(beta, dim, self.noise_scale, batch_size)

    def release(self, dim: int) -> Release:
        return LaplaceRelease(self.laplace_scale)
