"""Per-canary scores the server computes from one client's release (privacy-math.md §10).

The input is the de-normalised release ``u = L'·(−Δ/η)`` of one round (or a ``(T, p)``
stack of them, scored in one pass): with ``k`` local steps of plain SGD it is exactly
``Σ_t (S_t + Σ_{in} c_j + N_t)``, the clipped sums, the canaries (``k`` times) and the noise
of every step. Each function returns, per canary, the
log-likelihood ratio ``log p(u | canary in) / p(u | canary out)`` of the release under the
model "everything but this canary is noise" — the Neyman–Pearson statistic for one canary when
the data's contribution is small. Scores of independent releases of the *same* canaries add:
the sum of per-release log-likelihood ratios (``scores.sum(axis=0)`` for a stack) is the
log-likelihood ratio of the composition.

Which statistic, per mechanism:

* ``gaussian`` (noise ``N(0, s²I)`` per step, ``s = σC``): ``(⟨u, c_j⟩ − k C²/2) / s²``
  exactly — the projection on the canary.
* ``laplace`` (noise ``Lap(b)^p`` per step): for ``k = 1`` exactly
  ``Σ_i (|u_i| − |u_i − c_ji|) / b`` — a clamped projection, which for a coordinate canary is
  ``(|u_i| − |u_i ∓ C|)/b``; for ``k > 1`` the summed noise is not Laplace and the Gaussian
  approximation of variance ``2kb²`` gives ``(⟨u, c_j⟩ − k‖c_j‖²/2) / (2b²)``.
* ``vmf`` (release ``s·y``, ``y ~ VMF(μ, κ)``, ``μ`` the direction of the augmented sum):
  only a direction is released, and the log-likelihood ratio is ``κ⟨y, μ_in − μ_out⟩``. To
  first order in ``C/‖B‖`` (``B`` the sum without canary ``j``) it is ``κ⟨y, c_⊥⟩/‖B‖``,
  ``c_⊥`` the part of ``c_j`` orthogonal to ``B``. The server knows neither ``B`` nor its
  norm (common to all canaries of a release), so the usable statistic is ``κ⟨y, d_j⟩``: it
  differs from ``⟨y, c_⊥⟩`` by ``⟨c_j, μ_B⟩⟨y, μ_B⟩``, a term that does not depend on the
  bit and adds a fraction ``≈ t²/(1 − t²)`` to the variance, ``t ≈ A_p(κ)`` the mean cosine
  (0.07 at ``p = 13,700``, ``κ = 1,000``: 0.5%). Summed over steps it is computed from
  ``−Δ/η = s·Σ_t y_t`` (:func:`vmf_scores`). Andrew et al. (2024) use the same cosine.

Whatever the data do, a score remains a function of the release alone, so the rigorous bound
(:mod:`~fedpriv.canaries.one_run`) stays valid; the data only add noise to the scores (loss
of power).

References
----------
.. [1] M. Nasr et al., "Tight auditing of differentially private machine learning", USENIX
   Security 2023 (white-box gradient canaries, projection scores).
.. [2] G. Andrew et al., "One-shot empirical privacy estimation for federated learning",
   ICLR 2024 (cosine of the canary with the released update).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fedpriv.canaries.design import CanaryDesign, coordinates, direction_blocks
from fedpriv.errors import InputError
from fedpriv.validate import check_dim, check_positive

__all__ = ["gaussian_scores", "laplace_scores", "projections", "vmf_scores"]


def _releases(design: CanaryDesign, release: npt.ArrayLike) -> np.ndarray:
    u = np.asarray(release, dtype=np.float64)
    if u.ndim not in (1, 2) or u.shape[-1] != design.dim or not np.all(np.isfinite(u)):
        raise InputError("release", f"an array of shape {u.shape}",
                         f"finite values of shape ({design.dim},) or (T, {design.dim})")
    return u


def projections(design: CanaryDesign, release: npt.ArrayLike) -> np.ndarray:
    """``⟨u, d_j⟩`` for every canary: shape ``(m,)`` for one release ``(p,)``, ``(T, m)`` for
    ``T`` releases ``(T, p)`` (one pass over the directions for all of them)."""
    u = _releases(design, release)
    if design.kind == "coordinate":
        index, sign = coordinates(design)
        return sign * u[..., index]
    out = np.empty((*u.shape[:-1], design.count))
    for start, rows in direction_blocks(design):
        out[..., start : start + rows.shape[0]] = (rows @ u.T).T  # rows on the left: fast BLAS
    return out


def gaussian_scores(
    design: CanaryDesign, release: npt.ArrayLike, *, noise_std: float, steps: int = 1
) -> np.ndarray:
    """Gaussian log-likelihood ratios ``(C⟨u, d_j⟩ − k C²/2) / s²`` (module docstring).

    ``noise_std`` is ``s = σC``, the standard deviation of one step's noise on the sum (the
    *declared* σ when auditing a claim); ``steps`` is ``k``.
    """
    s = check_positive("noise_std", noise_std)
    k = check_dim("steps", steps)
    c = design.clip
    return (c * projections(design, release) - k * c * c / 2.0) / (s * s)


def laplace_scores(
    design: CanaryDesign, release: npt.ArrayLike, *, noise_scale: float, steps: int = 1
) -> np.ndarray:
    """Laplace log-likelihood ratios (exact for one step, Gaussian approximation for more).

    ``noise_scale`` is ``b = λC``, the Laplace scale of one step's noise on the sum. The design
    must be ℓ1 (``norm=1``): an ℓ2-unit canary scaled to ``C`` can exceed the ℓ1 clipping
    bound, and the formal ε would not cover it.
    """
    b = check_positive("noise_scale", noise_scale)
    k = check_dim("steps", steps)
    if design.norm != 1:
        raise InputError("canaries.norm", design.norm, "1 for the Laplace mechanism (ℓ1 clipping)")
    c = design.clip
    if k > 1:
        proj = projections(design, release)
        sq_norms = np.concatenate([np.sum(rows**2, axis=1) for _, rows in direction_blocks(design)])
        return (c * proj - k * c * c * sq_norms / 2.0) / (2.0 * b * b)
    u = _releases(design, release)
    if u.ndim == 2:
        return np.stack([laplace_scores(design, row, noise_scale=b) for row in u])
    if design.kind == "coordinate":
        index, sign = coordinates(design)
        return (np.abs(u[index]) - np.abs(u[index] - c * sign)) / b
    out = np.empty(design.count)
    base = np.abs(u).sum()
    for start, rows in direction_blocks(design):
        out[start : start + rows.shape[0]] = base - np.abs(u - c * rows).sum(axis=1)
    return out / b


def vmf_scores(
    design: CanaryDesign, release: npt.ArrayLike, *, kappa: float, scale: float
) -> np.ndarray:
    """VMF first-order log-likelihood ratios ``κ⟨r, d_j⟩ / s`` (module docstring).

    Unlike the other scores, ``release`` is ``r = −Δ/η`` itself, not multiplied by ``L'``: the
    mechanism releases ``s·y`` per step, not a sum divided by the batch size, so
    ``r = s·Σ_t y_t`` and the score is ``κ Σ_t ⟨y_t, d_j⟩``. ``scale`` is the public ``s``
    (``vmf_scale``).
    """
    kap = check_positive("kappa", kappa)
    s = check_positive("scale", scale)
    return kap * projections(design, release) / s
