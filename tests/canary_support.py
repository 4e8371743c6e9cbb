"""Simulated client releases with canaries, in NumPy (the tests of fedpriv.canaries).

A client holds ``n`` records whose clipped gradients in round ``r`` are
``C·unit(a_r + ξ_i)`` — a shared direction ``a_r`` plus an individual part of about the same
norm, so a batch's gradients are strongly aligned (cosine ≈ ½, the hard case for canaries: the
data term in the scores is largest). Each of ``steps`` local steps Poisson-samples records
at ``rate``, adds the canary sum, and releases through the mechanism; the function returns
what the server scores per round: ``u = Σ_t (S_t + Σ_in c_j + N_t)`` for ``gaussian`` and
``laplace``, ``−Δ/η = s·Σ_t y_t`` for ``vmf``. The server's view is exactly this, since the
canaries do not depend on the model (plain SGD).
"""

from __future__ import annotations

import numpy as np

from fedpriv.canaries import CanaryDesign, canary_sum
from fedpriv.special.vmf_sampler import sample_vmf_cosine

DIM = 13_700  # the paper MLP's parameter count (privacy-math.md §8)


def _unit(x: np.ndarray, ord: int) -> np.ndarray:
    return x / np.linalg.norm(x, ord=ord, axis=-1, keepdims=True)


def _vmf(mean: np.ndarray, kappa: float, rng: np.random.Generator) -> np.ndarray:
    """One draw of VMF(mean, κ) (Wood's cosine, then a uniform orthogonal part)."""
    w = sample_vmf_cosine(kappa, mean.size, 1, rng)[0]
    v = rng.standard_normal(mean.size)
    v -= (v @ mean) * mean
    return w * mean + np.sqrt(1.0 - w * w) * _unit(v, 2)


def client_releases(
    design: CanaryDesign,
    *,
    mechanism: str,
    noise: float,
    rounds: int,
    steps: int,
    rate: float,
    records: int,
    rng: np.random.Generator,
    canary_rate: float = 1.0,
) -> np.ndarray:
    """``(rounds, p)`` releases of one client (module docstring).

    ``noise`` is the noise the client really adds: σ (Gaussian), λ (Laplace) or κ (VMF).
    ``canary_rate`` 1 inserts the in-canaries in every step; below 1 each joins each step with
    that probability, drawn from the client's ``rng``. The clip bound and dimension come
    from ``design``.
    """
    dim, clip = design.dim, design.clip
    norm = 1 if mechanism == "laplace" else 2
    every_step = canary_sum(design)
    out = np.zeros((rounds, dim))
    for r in range(rounds):
        shared = _unit(rng.standard_normal(dim), 2)
        grads = clip * _unit(shared + _unit(rng.standard_normal((records, dim)), 2), norm)
        for _ in range(steps):
            canaries = (every_step if canary_rate == 1.0
                        else canary_sum(design, rate=canary_rate, rng=rng))
            total = grads[rng.random(records) < rate].sum(axis=0) + canaries
            if mechanism == "gaussian":
                out[r] += total + noise * clip * rng.standard_normal(dim)
            elif mechanism == "laplace":
                out[r] += total + rng.laplace(0.0, noise * clip, dim)
            else:
                mean = _unit(total, 2) if np.any(total) else _unit(rng.standard_normal(dim), 2)
                out[r] += clip * _vmf(mean, noise, rng)
    return out
