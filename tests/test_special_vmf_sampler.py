"""Statistical tests of the O(p) VMF sampler (Wood's rejection step + orthogonal part).

Moments are checked against A_p(κ) = I_{p/2}(κ)/I_{p/2−1}(κ) and E[w²] = 1 − (p−1)A_p(κ)/κ
within 4 standard errors; distributions against scipy.stats.vonmises_fisher (exact, small p)
with two-sample KS tests; the orthogonal part for isotropy. Every seed is fixed.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from scipy import stats

from fedpriv.special.bessel import log_iv
from fedpriv.special.vmf_sampler import sample_uniform_direction, sample_vmf, sample_vmf_cosine

KAPPAS = [1.0, 10.0, 100.0, 1000.0, 1e4]


def _mean_resultant(dim: int, kappa: float) -> float:
    return float(np.exp(log_iv(dim / 2, kappa) - log_iv(dim / 2 - 1, kappa)))


def _unit(dim: int, seed: int) -> torch.Tensor:
    vec = torch.randn(dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return vec / vec.norm()


def _assert_mean_within(samples: np.ndarray, expected: float, n_se: float = 4.0) -> None:
    se = samples.std(ddof=1) / math.sqrt(samples.size)
    assert abs(samples.mean() - expected) < n_se * se, (samples.mean(), expected, se)


@pytest.mark.parametrize("kappa", [0.5, 3.0, 40.0])
def test_mean_resultant_length_oracles_agree(kappa: float) -> None:
    """A_p(κ) via log_iv equals coth κ − 1/κ at p = 3 and mpmath's ratio at p = 50."""
    assert _mean_resultant(3, kappa) == pytest.approx(1 / math.tanh(kappa) - 1 / kappa, rel=1e-12)
    with mpmath.workdps(30):
        ratio = mpmath.besseli(25, kappa) / mpmath.besseli(24, kappa)
    assert _mean_resultant(50, kappa) == pytest.approx(float(ratio), rel=1e-12)


@pytest.mark.parametrize("dim", [3, 50, 13_700])
@pytest.mark.parametrize("kappa", KAPPAS)
def test_cosine_moments(dim: int, kappa: float) -> None:
    rng = np.random.default_rng([dim, int(kappa)])
    w = sample_vmf_cosine(kappa, dim, 40_000, rng)
    a = _mean_resultant(dim, kappa)
    _assert_mean_within(w, a)
    _assert_mean_within(w**2, 1.0 - (dim - 1) * a / kappa)


@pytest.mark.parametrize(
    ("dim", "kappa", "gap"),
    [
        (3, 1e8, 1e-8),  # 1 − A₃(κ) = 1/κ − 2/(e^{2κ} − 1)
        # log_iv's absolute error (~1e-9 at κ = 1e7) is far below this gap's standard error.
        (13_700, 1e7, 1.0 - _mean_resultant(13_700, 1e7)),
    ],
)
def test_cosine_stable_for_huge_kappa(dim: int, kappa: float, gap: float) -> None:
    """1 − w is O((p−1)/(2κ)) here; check its mean against 1 − A_p(κ) relatively."""
    w = sample_vmf_cosine(kappa, dim, 40_000, np.random.default_rng(7))
    assert np.all(w <= 1.0)
    _assert_mean_within(1.0 - w, gap)


def test_kappa_zero_is_uniform() -> None:
    """On S² the cosine of a uniform direction is uniform on [−1, 1] (Archimedes)."""
    w = sample_vmf_cosine(0.0, 3, 5_000, np.random.default_rng(3))
    assert stats.kstest(w, stats.uniform(loc=-1, scale=2).cdf).pvalue > 1e-3


@pytest.mark.parametrize(("dim", "kappa", "count"), [(3, 10.0, 4000), (50, 100.0, 4000)])
def test_full_draws_unit_norm_and_cosine(dim: int, kappa: float, count: int) -> None:
    mean = _unit(dim, 11)
    y = sample_vmf(mean, kappa, torch.Generator().manual_seed(5), num_samples=count)
    assert y.shape == (count, dim)
    np.testing.assert_allclose(y.norm(dim=1).numpy(), 1.0, atol=1e-12)
    _assert_mean_within((y @ mean).numpy(), _mean_resultant(dim, kappa))


@pytest.mark.parametrize("kappa", [100.0, 1e4])
def test_large_dim_draws_cosine_and_isotropic_orthogonal_part(kappa: float) -> None:
    dim, count = 13_700, 400
    mean = _unit(dim, 12)
    y = sample_vmf(mean, kappa, torch.Generator().manual_seed(6), num_samples=count)
    np.testing.assert_allclose(y.norm(dim=1).numpy(), 1.0, atol=1e-12)
    w = y @ mean
    _assert_mean_within(w.numpy(), _mean_resultant(dim, kappa))
    v = (y - w[:, None] * mean) / (1 - w**2).sqrt()[:, None]
    # n·‖mean of v‖² ~ χ²_{p−1}/(p−1) for isotropic v: mean 1, sd sqrt(2/(p−1)).
    spread = count * float(v.mean(dim=0).norm() ** 2)
    assert abs(spread - 1.0) < 4 * math.sqrt(2 / (dim - 1))
    # Projections on fixed directions orthogonal to the mean have variance 1/(p−1).
    for seed in range(5):
        d = _unit(dim, 100 + seed)
        d = (d - (d @ mean) * mean) / (d - (d @ mean) * mean).norm()
        ratio = float((v @ d).square().mean()) * (dim - 1)
        assert abs(ratio - 1.0) < 4 * math.sqrt(2 / count)


def test_azimuth_uniform_on_sphere() -> None:
    mean = _unit(3, 13)
    basis = torch.linalg.qr(torch.cat([mean[:, None], torch.eye(3, dtype=torch.float64)], 1))[0]
    y = sample_vmf(mean, 5.0, torch.Generator().manual_seed(8), num_samples=5000)
    azimuth = torch.atan2(y @ basis[:, 2], y @ basis[:, 1]).numpy()
    assert stats.kstest(azimuth, stats.uniform(loc=-math.pi, scale=2 * math.pi).cdf).pvalue > 1e-3


@pytest.mark.parametrize("dim", [3, 5])
@pytest.mark.parametrize("kappa", [0.5, 5.0, 50.0])
def test_agrees_with_scipy_vonmises_fisher(dim: int, kappa: float) -> None:
    mean = _unit(dim, 14)
    ours = sample_vmf(mean, kappa, torch.Generator().manual_seed(9), num_samples=3000).numpy()
    exact = stats.vonmises_fisher(mean.numpy(), kappa).rvs(
        3000, random_state=np.random.default_rng(9)
    )
    direction = _unit(dim, 15).numpy()
    for project in (mean.numpy(), direction):
        assert stats.ks_2samp(ours @ project, exact @ project).pvalue > 1e-3


def test_same_seed_same_draw_and_float32() -> None:
    mean = _unit(200, 16).float()
    first = sample_vmf(mean, 30.0, torch.Generator().manual_seed(1))
    again = sample_vmf(mean, 30.0, torch.Generator().manual_seed(1))
    assert torch.equal(first, again) and first.dtype == torch.float32 and first.shape == (200,)
    assert not torch.equal(first, sample_vmf(mean, 30.0, torch.Generator().manual_seed(2)))
    assert abs(float(first.norm()) - 1.0) < 1e-5


def test_uniform_direction() -> None:
    draws = sample_uniform_direction(4, torch.Generator().manual_seed(4), 20_000)
    np.testing.assert_allclose(draws.norm(dim=1).numpy(), 1.0, rtol=1e-6)
    # E[y] = 0 and E[y yᵀ] = I/4 for uniform directions in R⁴ (entries of y yᵀ have sd < 1/2).
    assert draws.mean(dim=0).abs().max() < 4 * 0.5 / math.sqrt(20_000)
    second = (draws.T @ draws / 20_000).numpy()
    np.testing.assert_allclose(second, np.eye(4) / 4, atol=4 * 0.5 / math.sqrt(20_000))


def test_bad_inputs() -> None:
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError):
        sample_vmf(torch.ones(3), 1.0, gen)
    with pytest.raises(ValueError):
        sample_vmf(torch.tensor([1.0, 0.0]), -1.0, gen)
    with pytest.raises(ValueError):
        sample_vmf_cosine(1.0, 1, 10, np.random.default_rng(0))
