"""Canary scores: each is the log-likelihood ratio it claims, checked against SciPy densities."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from fedpriv.canaries import (
    CanaryDesign,
    canary_sum,
    directions,
    gaussian_scores,
    inclusion,
    laplace_scores,
    projections,
    vmf_scores,
)
from fedpriv.errors import InputError
from tests.canary_support import _vmf


@pytest.mark.parametrize("kind", ["coordinate", "random"])
def test_projections_match_the_dense_directions(kind: str) -> None:
    design = CanaryDesign(3, 300, 700, 1.0, kind)
    u = np.random.default_rng(0).standard_normal((4, 700))
    d = directions(design)
    np.testing.assert_allclose(projections(design, u), u @ d.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(projections(design, u[0]), d @ u[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("release", [np.zeros(5), np.zeros((2, 3, 700)), np.full(700, np.nan)])
def test_releases_of_the_wrong_shape_are_refused(release: np.ndarray) -> None:
    with pytest.raises(InputError):
        projections(CanaryDesign(3, 30, 700, 1.0), release)


@pytest.mark.parametrize(("kind", "steps"), [("coordinate", 1), ("random", 1), ("random", 3)])
def test_gaussian_score_is_the_log_likelihood_ratio(kind: str, steps: int) -> None:
    """``log N(u; k c_j, k s²) − log N(u; 0, k s²)`` summed over coordinates, by SciPy."""
    clip, s = 0.8, 1.3
    design = CanaryDesign(1, 40, 500, clip, kind)
    u = np.random.default_rng(1).normal(0.0, s * np.sqrt(steps), 500)
    sd = s * np.sqrt(steps)
    base = scipy.stats.norm.logpdf(u, 0.0, sd).sum()
    exact = [scipy.stats.norm.logpdf(u, steps * clip * d, sd).sum() - base
             for d in directions(design)]
    got = gaussian_scores(design, u, noise_std=s, steps=steps)
    np.testing.assert_allclose(got, exact, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", ["coordinate", "random"])
def test_laplace_score_is_the_log_likelihood_ratio(kind: str) -> None:
    """One step: ``Σ_i log Lap(u_i − c_ji; b) − log Lap(u_i; b)``, by SciPy."""
    clip, b = 1.5, 2.0
    design = CanaryDesign(2, 40, 500, clip, kind, norm=1)
    u = np.random.default_rng(2).laplace(0.0, b, 500)
    base = scipy.stats.laplace.logpdf(u, 0.0, b).sum()
    exact = [scipy.stats.laplace.logpdf(u - clip * d, 0.0, b).sum() - base
             for d in directions(design)]
    np.testing.assert_allclose(laplace_scores(design, u, noise_scale=b), exact, atol=1e-9)
    np.testing.assert_allclose(laplace_scores(design, np.stack([u, u]), noise_scale=b),
                               [exact, exact], atol=1e-9)


def test_laplace_score_over_several_steps_is_the_gaussian_approximation() -> None:
    """k > 1: the summed noise has variance 2kb²; the score is the matching normal LLR."""
    clip, b, k = 1.5, 2.0, 4
    design = CanaryDesign(2, 40, 500, clip, "random", norm=1)
    u = np.random.default_rng(3).laplace(0.0, b, (k, 500)).sum(axis=0)
    sd = np.sqrt(2 * k) * b
    base = scipy.stats.norm.logpdf(u, 0.0, sd).sum()
    exact = [scipy.stats.norm.logpdf(u, k * clip * d, sd).sum() - base
             for d in directions(design)]
    got = laplace_scores(design, u, noise_scale=b, steps=k)
    np.testing.assert_allclose(got, exact, rtol=1e-9, atol=1e-9)


def test_laplace_needs_l1_canaries() -> None:
    """An ℓ2-unit canary scaled to C can have ℓ1 norm up to C√p: not covered by ℓ1 clipping."""
    with pytest.raises(InputError, match="norm"):
        laplace_scores(CanaryDesign(2, 40, 500, 1.0), np.zeros(500), noise_scale=1.0)


def test_vmf_score_is_the_first_order_log_likelihood_ratio() -> None:
    """The exact LLR of canary j is ``κ⟨y, μ_in − μ_out⟩`` (μ the direction of the sum with and
    without ``c_j``) ≈ ``κ⟨y, c_⊥⟩/‖B‖``, ``c_⊥`` the part of ``c_j`` orthogonal to the rest of
    the sum. The score ``κ⟨y, d_j⟩`` adds ``⟨d_j, μ⟩⟨y, μ⟩``, bit-independent noise of relative
    variance ``t²/(1−t²)``, ``t = ⟨y, μ⟩ ≈ A_p(κ) ≈ 0.07`` at ``p = 13,700, κ = 1,000``: their
    correlation is about ``√(1 − t²) ≈ 0.997``; 0.99 would need ``t ≈ 0.14``, twice its mean
    (its standard deviation is ``≈ 1/√p ≈ 0.009``)."""
    dim, kappa = 13_700, 1_000.0
    design = CanaryDesign(4, 200, dim, 1.0, "random")
    rng = np.random.default_rng(4)
    total = canary_sum(design) + 10.0 * rng.standard_normal(dim) / np.sqrt(dim)
    y = _vmf(total / np.linalg.norm(total), kappa, rng)
    bits, d = inclusion(design), directions(design)
    with_j = np.where(bits[:, None], total, total + d)
    without_j = with_j - d
    unit = np.linalg.norm
    exact = kappa * (with_j / unit(with_j, axis=1, keepdims=True)
                     - without_j / unit(without_j, axis=1, keepdims=True)) @ y
    got = vmf_scores(design, 3.0 * y, kappa=kappa, scale=3.0)
    np.testing.assert_allclose(got, kappa * d @ y, rtol=1e-10, atol=1e-10)
    assert np.corrcoef(got, exact)[0, 1] > 0.99
