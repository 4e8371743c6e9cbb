"""Simulated client-rounds for the verification tests: the releases of privacy-math.md §2 built
with numpy in float32, applied as local SGD steps to float32 parameters (the round trip the
server sees), plus the claim an honest client would send: the generic declaration and its
mechanism, whose own ``verify`` the server runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from fedpriv.special.vmf_sampler import sample_vmf_cosine
from fedpriv.verification import Declaration

F32 = np.float32


def clip_rows(grads: np.ndarray, bound: float, norm_ord: int) -> np.ndarray:
    """``ḡ_i = g_i · min(1, C/‖g_i‖)`` in float32, as fedpriv.gradients.clipping does."""
    norms = np.linalg.norm(grads, ord=norm_ord, axis=1) if grads.size else np.zeros(0, F32)
    factors = np.minimum(F32(1), F32(bound) / np.maximum(norms, F32(1e-30)))
    return grads * factors[:, None].astype(F32)


def gradients(rng: np.random.Generator, count: int, dim: int, aligned: bool) -> np.ndarray:
    """Per-example gradients: all along one direction with norm 5 (every one clipped; their
    clipped sum has the largest norm clipping allows), or independent with random norms."""
    if aligned:
        direction = np.ones(dim, F32) / F32(np.sqrt(dim))
        return np.tile(F32(5) * direction, (count, 1))
    scales = rng.uniform(0.05, 3.0, size=(count, 1)).astype(F32)
    return (rng.standard_normal((count, dim), dtype=F32) * scales / F32(np.sqrt(dim))).astype(F32)


@dataclass(frozen=True)
class Claim:
    """What a simulated client declares: the generic declaration, its mechanism's name and
    the mechanism's parameters (``clip`` is the declaration's sensitivity)."""

    declaration: Declaration
    mechanism: str
    params: Mapping[str, float] = field(default_factory=dict)

    def built(self):  # noqa: ANN201 - a fedpriv Mechanism
        """The declared mechanism, built through the registry (so the server's route —
        ``mechanism.verify`` — is what the tests exercise)."""
        from fedpriv.mechanisms import build_mechanism

        return build_mechanism(self.mechanism, {"kappa": 1.0, **self.params,
                                                "clip": self.declaration.sensitivity})


def release(
    mechanism: str, clipped_sum: np.ndarray, batch: float, rng: np.random.Generator,
    clip: float, noise: Mapping[str, float],
) -> np.ndarray:
    """One step's float32 release of privacy-math.md §2 for a clipped (or raw) sum, with the
    noise parameters ``noise`` (``noise_multiplier``, ``laplace_scale``, ``vmf_scale``)."""
    c = F32(clip)
    if mechanism == "gaussian":
        draw = rng.standard_normal(clipped_sum.size, dtype=F32)
        return (clipped_sum + draw * F32(noise["noise_multiplier"]) * c) / F32(batch)
    if mechanism == "laplace":
        e = -np.log1p(-rng.random((2, clipped_sum.size)))  # float64 exponentials, as fedpriv
        scale = F32(noise["laplace_scale"]) * c
        return (clipped_sum + scale * (e[1] - e[0]).astype(F32)) / F32(batch)
    if mechanism == "vmf":
        return F32(noise["vmf_scale"]) * vmf_direction(clipped_sum, rng, kappa=50.0)
    return clipped_sum / F32(batch)  # clip, none


def vmf_direction(total: np.ndarray, rng: np.random.Generator, kappa: float) -> np.ndarray:
    """A float32 VMF draw around the direction of ``total`` (uniform if it is 0), O(p)."""
    norm = np.linalg.norm(total)
    if norm > 0:
        mean = total / norm
    else:
        mean = rng.standard_normal(total.size, dtype=F32)
        mean /= np.linalg.norm(mean)
    w = F32(sample_vmf_cosine(kappa, total.size, 1, rng)[0])
    normal = rng.standard_normal(total.size, dtype=F32)
    orthogonal = normal - F32(normal @ mean) * mean
    v = orthogonal / np.linalg.norm(orthogonal)
    return (w * mean + np.sqrt(max(F32(0), F32(1) - w * w)) * v).astype(F32)


def simulate_round(
    mechanism: str,
    rng: np.random.Generator,
    *,
    dim: int = 13_700,
    local_size: int = 640,
    batch_size: int = 64,
    steps: int = 1,
    lr: float = 0.1,
    aligned: bool = False,
    sampling: str = "poisson",
    report_batches: bool = False,
    released: str | None = None,
    actual: dict[str, float] | None = None,
    update_factor: float = 1.0,
    **params: float,
) -> tuple[Claim, np.ndarray, np.ndarray]:
    """One client-round: ``(claim, θ, θ_client)``, both float32. Honest unless the release
    is made by another mechanism (``released``), with other parameters (``actual``), or the
    update is multiplied by ``update_factor``."""
    clip = params.pop("clip_bound", 1.0)
    d = Declaration(
        sensitivity=clip,
        lr=lr,
        steps=steps,
        batch_size=float(batch_size),
        local_size=local_size,
        sample_rate=batch_size / local_size,
        sampling=sampling,
    )
    declared = {"noise_multiplier": 1.0, "laplace_scale": 1.0, "vmf_scale": 1.0, **params}
    truth = {**declared, **(actual or {})}
    released = released or mechanism
    theta = (F32(0.1) * rng.standard_normal(dim, dtype=F32)).astype(F32)
    current, sizes = theta.copy(), []
    norm_ord = 1 if released == "laplace" else 2
    for _ in range(steps):
        count = rng.binomial(local_size, d.sample_rate) if sampling == "poisson" else batch_size
        grads = gradients(rng, count, dim, aligned)
        if released != "none":
            grads = clip_rows(grads, clip, norm_ord)
        total = grads.sum(axis=0, dtype=F32) if count else np.zeros(dim, F32)
        step = release(released, total, d.batch_size, rng, clip, truth)
        current = (current - F32(lr) * step).astype(F32)
        sizes.append(int(count))
    current = (theta + F32(update_factor) * (current - theta)).astype(F32)
    if report_batches:
        d = Declaration(**{**d.__dict__, "batch_sizes": tuple(sizes)})
    return Claim(d, mechanism, declared), theta, current


def verify(claim: Claim, theta, theta_client, **kwargs):  # noqa: ANN001, ANN201
    """:func:`fedpriv.verification.verify_update` with the declared mechanism's own check."""
    from fedpriv.verification import verify_update

    return verify_update(claim.declaration, theta, theta_client, claim.built().verify, **kwargs)
