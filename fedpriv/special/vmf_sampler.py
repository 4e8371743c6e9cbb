"""O(p) sampling of the von Mises–Fisher distribution on the unit sphere ``S^{p−1}``.

``scipy.stats.vonmises_fisher`` is exact but builds a p×p rotation per call (minutes at
p = 13,700), so the sampler is written here (privacy-math.md §2, "Sampling VMF at large p"):
Wood's rejection step draws the cosine ``w = xᵀy``, then ``y = w·x + sqrt(1−w²)·v`` with ``v``
uniform on the unit sphere orthogonal to ``x`` (the normalised orthogonal part of a standard
normal vector).

Wood's constants are evaluated in rationalised forms (``b = (p−1)/(2κ + sqrt(4κ²+(p−1)²))``,
``1 − b`` and ``1 − x₀`` without subtraction) so the sampler is stable from ``κ ≪ p`` to
``κ ≫ p``. The cosine is drawn in float64 with a NumPy generator seeded from the caller's
``torch.Generator``: every random bit still comes from that generator, reproducibly.

References
----------
.. [1] A. T. A. Wood, "Simulation of the von Mises Fisher distribution", Communications in
   Statistics — Simulation and Computation 23(1), 157–164, 1994 (the rejection step).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["sample_uniform_direction", "sample_vmf", "sample_vmf_cosine"]


def _wood_constants(kappa: float, dim: int) -> tuple[float, float, float, float]:
    """Return ``(b, 1−b, x₀, 1−x₀)`` of Wood's algorithm, free of cancellation."""
    t = dim - 1.0
    root = math.hypot(2.0 * kappa, t)
    b = t / (2.0 * kappa + root)
    # 1 − b = (2κ + root − t)/(2κ + root), and root − t = 2κ · 2κ/(root + t).
    one_minus_b = 2.0 * kappa * (1.0 + 2.0 * kappa / (root + t)) / (2.0 * kappa + root)
    x0 = one_minus_b / (2.0 - one_minus_b)
    return b, one_minus_b, x0, 2.0 * b / (1.0 + b)


def sample_vmf_cosine(
    kappa: float, dim: int, num_samples: int, rng: np.random.Generator
) -> np.ndarray:
    """Draw ``w = xᵀy`` for ``y ~ VMF(x, κ)`` on ``S^{dim−1}`` by Wood's rejection step.

    ``w`` has density proportional to ``e^{κw} (1−w²)^{(dim−3)/2}`` on ``[−1, 1]``.

    Parameters
    ----------
    kappa
        Concentration ``κ ≥ 0`` (``κ = 0`` is the uniform distribution).
    dim
        Ambient dimension ``p ≥ 2``.
    num_samples
        Number of independent draws.
    rng
        Source of randomness.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(num_samples,)``.
    """
    if dim < 2 or not (math.isfinite(kappa) and kappa >= 0):
        raise ValueError(
            f"sample_vmf_cosine: need dim >= 2 and finite kappa >= 0, got {dim}, {kappa}"
        )
    t = dim - 1.0
    b, one_minus_b, x0, gap = _wood_constants(kappa, dim)
    log_one_minus_x0_sq = math.log(4.0 * b) - 2.0 * math.log1p(b)
    out = np.empty(num_samples)
    todo = np.arange(num_samples)
    while todo.size:
        z = rng.beta(t / 2.0, t / 2.0, size=todo.size)
        log_u = np.log(rng.random(todo.size))
        den = 1.0 - one_minus_b * z
        one_minus_w = 2.0 * b * z / den
        # Wood's test κw + t·log(1 − x₀w) − c ≥ log U, c = κx₀ + t·log(1 − x₀²), rewritten
        # with w − x₀ = (1−x₀) − (1−w) and 1 − x₀w = (1−x₀) + x₀(1−w).
        log_ratio = kappa * (gap - one_minus_w) + t * (
            np.log(gap + x0 * one_minus_w) - log_one_minus_x0_sq
        )
        accept = log_ratio >= log_u
        out[todo[accept]] = ((1.0 - (2.0 - one_minus_b) * z) / den)[accept]
        todo = todo[~accept]
    return out


def _numpy_rng(generator: torch.Generator) -> np.random.Generator:
    """A NumPy generator seeded by one 63-bit draw from ``generator``."""
    import torch

    seed = torch.randint(0, 2**63 - 1, (), generator=generator, device=generator.device)
    return np.random.default_rng(int(seed.item()))


def sample_uniform_direction(
    dim: int,
    generator: torch.Generator,
    num_samples: int | None = None,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Draw uniformly distributed unit vectors in ``R^dim`` (normalised standard normals).

    Returns shape ``(dim,)`` when ``num_samples`` is None, else ``(num_samples, dim)``.
    """
    import torch

    shape = (1 if num_samples is None else num_samples, dim)
    normal = torch.randn(shape, generator=generator, dtype=dtype, device=device)
    unit = normal / torch.linalg.vector_norm(normal, dim=1, keepdim=True)
    return unit[0] if num_samples is None else unit


def sample_vmf(
    mean: torch.Tensor,
    kappa: float,
    generator: torch.Generator,
    num_samples: int | None = None,
) -> torch.Tensor:
    """Draw ``y ~ VMF(mean, κ)`` on the unit sphere in O(p) per draw.

    Parameters
    ----------
    mean
        Unit mean direction, shape ``(p,)``, ``p ≥ 2``; its dtype and device are the output's.
    kappa
        Concentration ``κ ≥ 0``.
    generator
        The only source of randomness (on ``mean``'s device).
    num_samples
        None for one draw of shape ``(p,)``; otherwise ``(num_samples, p)`` draws.

    Returns
    -------
    torch.Tensor
        Unit vector(s) ``w·mean + sqrt(1−w²)·v`` with ``v ⟂ mean`` uniform.
    """
    import torch

    if mean.ndim != 1 or abs(float(torch.linalg.vector_norm(mean)) - 1.0) > 1e-4:
        raise ValueError("sample_vmf: mean must be a unit vector of shape (p,)")
    dim = mean.shape[0]
    count = 1 if num_samples is None else num_samples
    cosine = sample_vmf_cosine(kappa, dim, count, _numpy_rng(generator))
    w = torch.from_numpy(cosine).to(dtype=mean.dtype, device=mean.device).unsqueeze(1)
    normal = torch.randn((count, dim), generator=generator, dtype=mean.dtype, device=mean.device)
    orthogonal = normal - (normal @ mean).unsqueeze(1) * mean
    v = orthogonal / torch.linalg.vector_norm(orthogonal, dim=1, keepdim=True)
    y = w * mean + (1.0 - w * w).clamp(min=0.0).sqrt() * v
    return y[0] if num_samples is None else y
