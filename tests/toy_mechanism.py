"""A mechanism added the way a contributor adds one: this single file, nothing else edited.

``variance-gaussian`` is the Gaussian mechanism parametrised by the noise *variance* over the
squared sensitivity, ``v = σ²`` — a toy whose every privacy number must equal the Gaussian's at
``σ = √v``, which makes it checkable (tests/test_mechanism_extension.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedpriv.accounting.events import Release
from fedpriv.mechanisms.base import ClippedMechanism, param
from fedpriv.validate import check_positive


@dataclass(frozen=True)
class VarianceGaussianRelease(Release):
    """One Gaussian release with noise variance ``v`` (in squared sensitivities)."""

    noise_variance: float
    mechanism: ClassVar[str] = "variance-gaussian"
    parameter_name: ClassVar[str] = "noise_variance"
    parameter_help: ClassVar[str] = "noise variance over the squared l2 clip bound"

    def __post_init__(self) -> None:
        check_positive("noise_variance", self.noise_variance)

    @classmethod
    def calibration_start(cls, dim: int | None) -> VarianceGaussianRelease:
        return cls(1.0)

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        return np.asarray(orders, dtype=float) / (2.0 * self.noise_variance)

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        from fedpriv.accounting.dp_library import gaussian_pld

        sigma = math.sqrt(self.noise_variance)
        return gaussian_pld(sigma, sample_rate, discretization, steps=steps)

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        from fedpriv.accounting.dp_library import gaussian_grid_need

        return gaussian_grid_need(math.sqrt(self.noise_variance), sample_rate, steps)

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        from fedpriv.leakage.tradeoff import gaussian_tradeoff

        return gaussian_tradeoff(alpha, 1.0 / math.sqrt(self.noise_variance))

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        from fedpriv.leakage.capacity import log_capacity_gaussian

        return log_capacity_gaussian(dim, radius, math.sqrt(self.noise_variance))

    def doubled(self) -> VarianceGaussianRelease:
        """Twice the sensitivity: a quarter of the variance (fixed-size sampling)."""
        return VarianceGaussianRelease(self.noise_variance / 4.0)

    @property
    def noise_law(self) -> tuple[str, float]:
        """A Gaussian at σ = √v: the replace-one mixture PLD takes it."""
        return "gaussian", math.sqrt(self.noise_variance)


@dataclass(frozen=True)
class VarianceGaussianMechanism(ClippedMechanism):
    """Clip in ℓ2, sum, add ``N(0, v·C² I)``, divide by ``L``."""

    noise_variance: float = param(1.0, check_positive, "a number > 0")
    name: ClassVar[str] = "variance-gaussian"
    label: ClassVar[str] = "Gaussian (variance)"

    def _release(self, clipped_sum: Any, generator: Any, batch_size: float) -> Any:
        noise = clipped_sum.new_empty(clipped_sum.shape).normal_(generator=generator)
        std = math.sqrt(self.noise_variance) * self.sensitivity
        return (clipped_sum + std * noise) / batch_size

    def release(self, dim: int) -> Release:
        return VarianceGaussianRelease(self.noise_variance)
