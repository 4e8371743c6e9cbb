"""privatize(): the released update of each mechanism, checked statistically.

Noise is recovered as ``L·release − Σ ḡ_i`` and compared with its law (moments within 4
standard errors, KS tests); VMF directions against A_p(κ). Seeds are fixed.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy import stats

from fedpriv.gradients import PerExampleGradients
from fedpriv.gradients.clipping import clip_flat
from fedpriv.mechanisms import build_mechanism, make_generator
from fedpriv.seeding import derive_seed
from fedpriv.special.bessel import log_iv

DIM = 200_000


def _within(samples: np.ndarray, expected: float, n_se: float = 4.0) -> bool:
    se = samples.std(ddof=1) / math.sqrt(samples.size)
    return abs(samples.mean() - expected) < n_se * se


def _big_example(dim: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(123)
    return 5.0 * torch.randn(1, dim, generator=gen, dtype=torch.float64) / math.sqrt(dim)


def _recovered_noise(name: str, params: dict, norm_ord: int = 2) -> np.ndarray:
    grads, batch_size = _big_example(DIM), 4.0
    release = build_mechanism(name, params).privatize(
        PerExampleGradients(grads), make_generator(1, 2, 3), batch_size=batch_size
    )
    clipped_sum = clip_flat(grads, params["clip"], norm_ord).sum(0)
    return (batch_size * release - clipped_sum).numpy()


def test_none_and_clip_are_means_over_the_expected_batch() -> None:
    grads = _big_example(30).repeat(3, 1) * torch.tensor(
        [[0.01], [1.0], [10.0]], dtype=torch.float64
    )
    gen = torch.Generator()
    raw = build_mechanism("none", {}).privatize(PerExampleGradients(grads), gen, batch_size=4.0)
    torch.testing.assert_close(raw, grads.sum(0) / 4.0, rtol=1e-15, atol=0)
    clipped = build_mechanism("clip", {"clip": 2.0}).privatize(
        PerExampleGradients(grads), gen, batch_size=4.0
    )
    norms = grads.norm(dim=1)
    expected = (grads * torch.clamp(2.0 / norms, max=1.0)[:, None]).sum(0) / 4.0
    torch.testing.assert_close(clipped, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize(("sigma", "clip"), [(1.0, 1.0), (0.7, 2.5)])
def test_gaussian_noise_law(sigma: float, clip: float) -> None:
    noise = _recovered_noise("gaussian", {"clip": clip, "noise_multiplier": sigma})
    std = sigma * clip
    assert _within(noise, 0.0)
    assert _within(noise**2, std**2)
    assert stats.kstest(noise, stats.norm(scale=std).cdf).pvalue > 1e-3


def test_gaussian_per_layer_noise_std() -> None:
    bounds, sizes = [0.5, 1.5, 2.0], [50_000, 100_000, 50_000]
    mech = build_mechanism("gaussian", {"clip_per_layer": bounds, "noise_multiplier": 1.2})
    release = mech.privatize(
        PerExampleGradients(torch.zeros(1, DIM), None, tuple(sizes)), make_generator(0, 0, 0),
        batch_size=1.0,
    )
    noise = release.double().numpy()
    assert _within(noise**2, (1.2**2) * sum(b * b for b in bounds))


@pytest.mark.parametrize(("scale", "clip"), [(1.0, 1.0), (0.3, 4.0)])
def test_laplace_noise_law(scale: float, clip: float) -> None:
    noise = _recovered_noise("laplace", {"clip": clip, "laplace_scale": scale}, norm_ord=1)
    b = scale * clip
    assert _within(noise, 0.0)
    assert _within(np.abs(noise), b)  # E|X| = b
    assert _within(noise**2, 2 * b * b)  # Var X = 2b²
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > 1e-3


def test_laplace_clips_in_l1() -> None:
    grads = torch.tensor([[3.0, -4.0, 0.0], [0.1, 0.1, 0.1]], dtype=torch.float64)
    from fedpriv.mechanisms.laplace import LaplaceMechanism

    # built directly: λ = 1e-12 is below what a config takes (MIN_NOISE), noise ~1e-12 shows
    # the clipping alone
    mech = LaplaceMechanism(clip=1.0, laplace_scale=1e-12)
    release = mech.privatize(PerExampleGradients(grads), make_generator(0, 0, 0), batch_size=1.0)
    expected = torch.tensor([3 / 7 + 0.1, -4 / 7 + 0.1, 0.1], dtype=torch.float64)
    torch.testing.assert_close(release, expected, rtol=0, atol=1e-9)


def _vmf_releases(params: dict, grads: torch.Tensor, count: int) -> torch.Tensor:
    mech, gen = build_mechanism("vmf", params), make_generator(5, 6, 7)
    source = PerExampleGradients(grads)
    return torch.stack([mech.privatize(source, gen, batch_size=8.0) for _ in range(count)])


def test_vmf_direction_is_that_of_the_clipped_sum() -> None:
    # Raw sum points mostly along e₁; the clipped sum along (e₁ + e₂)/√2.
    grads = torch.zeros(2, 5, dtype=torch.float64)
    grads[0, 0], grads[1, 1] = 10.0, 1.0
    kappa, count = 20.0, 3000
    releases = _vmf_releases({"clip": 1.0, "kappa": kappa, "vmf_scale": 0.5}, grads, count)
    np.testing.assert_allclose(releases.norm(dim=1).numpy(), 0.5, rtol=1e-12)
    y = (releases / 0.5).numpy()
    u = np.array([1.0, 1.0, 0.0, 0.0, 0.0]) / math.sqrt(2)
    a = float(np.exp(log_iv(2.5, kappa) - log_iv(1.5, kappa)))
    assert _within(y @ u, a)  # E[uᵀy] = A_p(κ)
    for k in range(5):  # E[y] = A_p(κ)·u coordinate-wise
        assert _within(y[:, k], a * u[k])


def test_vmf_zero_sum_gives_uniform_direction() -> None:
    releases = _vmf_releases({"kappa": 1e4}, torch.zeros(0, 3, dtype=torch.float64), 3000)
    np.testing.assert_allclose(releases.norm(dim=1).numpy(), 1.0, rtol=1e-12)
    y = releases.numpy()
    for k in range(3):
        assert _within(y[:, k], 0.0) and _within(y[:, k] ** 2, 1 / 3)


def test_vmf_keep_norm_releases_mean_clipped_norm_without_guarantee() -> None:
    grads = torch.tensor([[0.3, 0.4], [3.0, 4.0], [0.0, -2.0]], dtype=torch.float64)
    mech = build_mechanism("vmf", {"clip": 1.0, "kappa": 50.0, "vmf_keep_norm": True})
    release = mech.privatize(PerExampleGradients(grads), make_generator(0, 0, 0), batch_size=4.0)
    clipped_sum = torch.tensor([0.3 + 0.6, 0.4 + 0.8 - 1.0], dtype=torch.float64)
    assert float(release.norm()) == pytest.approx(float(clipped_sum.norm()) / 4.0, rel=1e-12)
    assert not mech.release(2).formal_guarantee
    release = mech.release(2)
    assert np.isinf(release.rdp(np.array([2.0, 8.0]))).all()
    assert math.isinf(release.pure_ldp_epsilon(1.0))
    assert math.isinf(release.log_bayes_capacity(2, 1.0))
    assert np.array_equal(release.tradeoff(np.linspace(0, 1, 5)), np.zeros(5))


@pytest.mark.parametrize("name", ["none", "clip", "gaussian", "laplace", "vmf"])
def test_same_seed_same_release(name: str) -> None:
    grads = torch.randn(16, 300, generator=torch.Generator().manual_seed(0))
    mech = build_mechanism(name, {})
    first = mech.privatize(PerExampleGradients(grads), make_generator(9, 3, 4), batch_size=16.0)
    again = mech.privatize(PerExampleGradients(grads), make_generator(9, 3, 4), batch_size=16.0)
    assert first.shape == (300,) and first.dtype == torch.float32
    assert torch.equal(first, again)
    if name in ("gaussian", "laplace", "vmf"):
        other = mech.privatize(PerExampleGradients(grads), make_generator(9, 3, 5), batch_size=16.0)
        assert not torch.equal(first, other)


@pytest.mark.parametrize("name", ["none", "clip", "gaussian", "laplace", "vmf"])
def test_empty_batch(name: str) -> None:
    release = build_mechanism(name, {}).privatize(
        PerExampleGradients(torch.zeros(0, 7)), make_generator(0, 0, 0), batch_size=3.0
    )
    assert release.shape == (7,) and torch.isfinite(release).all()


@pytest.mark.parametrize("name", ["none", "clip", "gaussian", "laplace", "vmf"])
def test_non_finite_gradients_propagate(name: str) -> None:
    grads = torch.ones(2, 4)
    grads[1, 2] = math.nan
    release = build_mechanism(name, {}).privatize(
        PerExampleGradients(grads), make_generator(0, 0, 0), batch_size=2.0
    )
    assert torch.isnan(release).any()


def test_derived_seeds_distinct_and_stable_across_processes() -> None:
    tuples = [(0, 0, 0, "noise"), (0, 0, 1, "noise"), (0, 1, 0, "noise"), (1, 0, 0, "noise")]
    tuples.append((0, 0, 0, "batch"))
    seeds = [derive_seed(*t) for t in tuples]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**63 for s in seeds)
    code = (
        "from fedpriv.seeding import derive_seed; print(derive_seed(0, 0, 0, 'batch'))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert int(out.stdout) == seeds[-1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [1, 15, 16, 17, 300, 13_700])
def test_gaussian_release_draws_what_it_drew_before(dtype: torch.dtype, dim: int) -> None:
    """The release is ``(Σḡ + σC·z)/L`` with ``z`` the generator's standard normals, bit for
    bit as the two-pass ``normal_().mul_(σC)`` gave it, and the generator ends in the same
    state: a seed draws the same noise whether or not the scale rides on the draw."""
    clipped = torch.randn(dim, generator=torch.Generator().manual_seed(1), dtype=dtype)
    mech = build_mechanism("gaussian", {"noise_multiplier": 0.37, "clip": 1.7})
    for seed in range(5):
        before, gen = make_generator(seed, 2, 3), make_generator(seed, 2, 3)
        z = torch.empty(dim, dtype=dtype).normal_(generator=before)
        expected = (clipped + mech.noise_std * z) / 16.0
        got = mech._release(clipped, gen, 16.0)
        assert torch.equal(got, expected)
        assert torch.equal(gen.get_state(), before.get_state())
