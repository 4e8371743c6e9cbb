"""``gaussian``: the Gaussian mechanism of DP-SGD.

privacy-math.md §2: release ``(Σ_i ḡ_i + N(0, σ²C² I)) / L``, ``ḡ_i`` clipped in ℓ2 to ``C``
(per layer: ``C = sqrt(Σ C_r²)``, the overall bound). One release is ``μ``-GDP with ``μ = 1/σ``.
Its Poisson-subsampled RDP and PLD come from Google's dp-accounting (§3; the maintained analysis,
not re-derived), its Bayes capacity from :func:`fedpriv.leakage.capacity.log_capacity_gaussian`
(§5), its trade-off function from :func:`fedpriv.leakage.tradeoff.gaussian_tradeoff` (§4). It
has no finite pure LDP parameter (§6). σ = 0 releases the clipped sum without noise: no
guarantee.

References
----------
.. [1] M. Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, Algorithm 1.
.. [2] J. Dong, A. Roth, W. Su, "Gaussian differential privacy", JRSS-B 2022 (μ-GDP).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedpriv.accounting.events import NoGuarantee, Release
from fedpriv.mechanisms.base import NOISE_ALLOWED, ClippedMechanism, check_noise, param
from fedpriv.validate import check_positive

if TYPE_CHECKING:
    import torch

    from fedpriv.canaries import CanaryDesign
    from fedpriv.verification import ClientUpdate, Verdict
    from fedpriv.verification.observed import NoiseObservation
    from fedpriv.verification.verdict import Checked

__all__ = ["GaussianMechanism", "GaussianRelease"]


@dataclass(frozen=True)
class GaussianRelease(Release):
    """One release with noise multiplier ``σ > 0`` (noise std over the ℓ2 sensitivity)."""

    noise_multiplier: float
    mechanism: ClassVar[str] = "gaussian"
    parameter_name: ClassVar[str] = "noise_multiplier"
    spec_names: ClassVar[dict[str, str]] = {"sigma": "noise_multiplier"}
    absolute_noise: ClassVar[str] = "noise_std"
    parameter_help: ClassVar[str] = "Gaussian sigma: noise std over the l2 clip bound"

    def __post_init__(self) -> None:
        check_positive("noise_multiplier", self.noise_multiplier)

    @classmethod
    def calibration_start(cls, dim: int | None) -> GaussianRelease:
        return cls(1.0)

    @property
    def accounted_noise(self) -> float:
        """The noise multiplier of the neighbouring pair the accountant composes: ``σ`` for
        add/remove-one of a record (a subclass with other neighbours overrides it)."""
        return self.noise_multiplier

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        from fedpriv.accounting.rdp import gaussian_rdp

        return gaussian_rdp(orders, self.accounted_noise)

    def subsampled_rdp(self, orders: tuple[float, ...], sample_rate: float) -> np.ndarray:
        from fedpriv.accounting.dp_library import gaussian_subsampled_rdp

        return gaussian_subsampled_rdp(orders, self.accounted_noise, sample_rate)

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        from fedpriv.accounting.dp_library import gaussian_pld

        return gaussian_pld(self.accounted_noise, sample_rate, discretization, steps=steps)

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        from fedpriv.accounting.dp_library import gaussian_grid_need

        return gaussian_grid_need(self.accounted_noise, sample_rate, steps)

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        from fedpriv.leakage.tradeoff import gaussian_tradeoff

        return gaussian_tradeoff(alpha, 1.0 / self.accounted_noise)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        from fedpriv.leakage.capacity import log_capacity_gaussian

        return log_capacity_gaussian(dim, radius, self.noise_multiplier)

    def gaussian_equivalent(self, dim: int) -> float:
        return self.accounted_noise

    def doubled(self) -> GaussianRelease:
        """The same release at twice the sensitivity: σ/2."""
        return replace(self, noise_multiplier=self.noise_multiplier / 2.0)

    @property
    def noise_law(self) -> tuple[str, float]:
        return "gaussian", self.accounted_noise


def _fused_scale(noise: torch.Tensor) -> bool:
    """Whether ``noise.normal_(0, s)`` draws exactly ``noise.normal_().mul_(s)``, bit for bit
    and from the same generator state, so the scale may ride on the draw (one pass over ``p``
    floats instead of two): torch's CPU kernel for a contiguous float32/float64 tensor of at
    least 16 entries forms ``z·s + 0`` from the same ``z`` (Box–Muller in blocks of 16) and
    rounds it once, as ``mul_`` does. Smaller tensors take a serial double-precision path that
    rounds ``z·s`` differently, and other devices and dtypes are not checked, so they keep the
    two passes (``tests/test_mechanisms_release.py`` checks the equality)."""
    import torch

    return (noise.device.type == "cpu" and noise.dtype in (torch.float32, torch.float64)
            and noise.numel() >= 16 and noise.is_contiguous())


@dataclass(frozen=True)
class GaussianMechanism(ClippedMechanism):
    """Clip in ℓ2, sum, add ``N(0, (σ·C)² I)``, divide by ``L``."""

    noise_multiplier: float = param(1.0, check_noise, NOISE_ALLOWED)
    name: ClassVar[str] = "gaussian"
    label: ClassVar[str] = "Gaussian"

    @property
    def noise_std(self) -> float:
        """Standard deviation ``σ·C`` of the noise added to the sum."""
        return self.noise_multiplier * self.sensitivity

    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        noise = clipped_sum.new_empty(clipped_sum.shape)
        if _fused_scale(noise):  # σC·z drawn in one pass: the same floats from the same state
            noise.normal_(0.0, self.noise_std, generator=generator)
        else:
            noise.normal_(generator=generator).mul_(self.noise_std)
        # (Σḡ + σC·z) / L in place, in that order: the same rounding as the out-of-place
        # expression, without two temporaries of size p
        return noise.add_(clipped_sum).div_(batch_size)

    def verify(self, update: ClientUpdate, alpha: float) -> Verdict:
        """The noise-norm sandwich and the noise-law test (σ = 0 is checked like ``clip``)."""
        from fedpriv.verification import verify_gaussian

        return verify_gaussian(update, noise_multiplier=self.noise_multiplier,
                               clip_bound=self.sensitivity, alpha=alpha)

    def verify_many(self, updates: Sequence[ClientUpdate], alpha: float) -> list[Checked]:
        """:meth:`verify` of each update, the replies sharing this declaration verified
        together (:func:`fedpriv.verification.gaussian_batch.verify_gaussian_batch`) where
        :meth:`verify` is this class's own: a subclass's override is never bypassed."""
        if type(self).verify is not GaussianMechanism.verify:
            return super().verify_many(updates, alpha)
        from fedpriv.verification.gaussian_batch import verify_gaussian_batch

        return verify_gaussian_batch(updates, noise_multiplier=self.noise_multiplier,
                                     clip_bound=self.sensitivity, alpha=alpha)

    def observe(self, update: ClientUpdate) -> NoiseObservation | str:
        """The ℓ2 norm of the noisy sum (:func:`fedpriv.verification.observed.observe_gaussian`);
        nothing at σ = 0 (no noise claimed: ε is infinite anyway)."""
        if self.noise_multiplier == 0.0:
            return "not observable: no noise declared"
        from fedpriv.verification.observed import observe_gaussian

        return observe_gaussian(update, clip_bound=self.sensitivity,
                                noise_multiplier=self.noise_multiplier)

    def observe_many(self, updates: Sequence[ClientUpdate]) -> list[NoiseObservation | str]:
        """:meth:`observe` of each update, the norms taken a block at a time
        (:func:`fedpriv.verification.observed.observe_gaussian_many`) where :meth:`observe`
        is this class's own: a subclass's override (client-level releases observe nothing) is
        never bypassed."""
        if self.noise_multiplier == 0.0 or type(self).observe is not GaussianMechanism.observe:
            return super().observe_many(updates)
        from fedpriv.verification.observed import observe_gaussian_many

        return observe_gaussian_many(updates, clip_bound=self.sensitivity,
                                     noise_multiplier=self.noise_multiplier)

    def canary_scores(
        self, design: CanaryDesign, pseudo_gradient: np.ndarray, *, batch_size: float,
        steps: int,
    ) -> np.ndarray | None:
        """The Gaussian log-likelihood ratios (:func:`fedpriv.canaries.gaussian_scores`) at
        the declared noise; projections when σ = 0."""
        if self.noise_multiplier == 0.0:
            return super().canary_scores(design, pseudo_gradient, batch_size=batch_size,
                                         steps=steps)
        from fedpriv.canaries import gaussian_scores

        return gaussian_scores(design, batch_size * pseudo_gradient, noise_std=self.noise_std,
                               steps=steps)

    def pac_accuracy(self, beta: float, dim: int, batch_size: float) -> float:
        """``σC·χ_p⁻¹(1 − β)/L`` in ℓ2 (:func:`fedpriv.leakage.robustness.gaussian_accuracy`;
        0 at σ = 0)."""
        from fedpriv.leakage.robustness import gaussian_accuracy

        return gaussian_accuracy(beta, dim, self.noise_std, batch_size)

    def release(self, dim: int) -> Release:
        if self.noise_multiplier == 0.0 or not math.isfinite(self.noise_std):
            return NoGuarantee(self.name)
        return GaussianRelease(self.noise_multiplier)
