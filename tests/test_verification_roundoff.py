"""Float32 tolerances (privacy-math.md §9.6) on real float32 computations: SGD round trips of
the parameters in numpy and torch, the torch VMF sampler, torch clipping, and a VMF release
through fedpriv's own mechanism checked by verify_vmf."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedpriv.gradients import PerExampleGradients
from fedpriv.gradients.clipping import clip_flat
from fedpriv.mechanisms import build_mechanism, make_generator
from fedpriv.special.vmf_sampler import sample_vmf
from fedpriv.verification import client_update, norm_tolerance, record_count, roundoff_bound
from fedpriv.verification.vmf import verify_vmf

F32 = np.float32


def _numpy_steps(theta: np.ndarray, releases: list[np.ndarray], lr: float) -> np.ndarray:
    for r in releases:
        theta = (theta - F32(lr) * r).astype(F32)
    return theta


def _torch_steps(theta: np.ndarray, releases: list[np.ndarray], lr: float) -> np.ndarray:
    p = torch.from_numpy(theta.copy())
    with torch.no_grad():
        for r in releases:
            p.sub_(lr * torch.from_numpy(r))  # a plain SGD step in float32
    return p.numpy()


@pytest.mark.parametrize("stepper", [_numpy_steps, _torch_steps])
@pytest.mark.parametrize(
    ("steps", "lr", "theta_scale", "release_scale"),
    [(1, 0.1, 0.1, 1.0), (1, 1e-3, 10.0, 1.0), (4, 3.0, 1e-3, 1.0), (4, 0.05, 1.0, 1e3)],
)
def test_roundoff_bound_holds_on_float32_round_trips(
    stepper, steps, lr, theta_scale, release_scale
):
    rng = np.random.default_rng(steps * 1000 + int(1 / lr))
    dim = 5000
    theta = (theta_scale * rng.standard_normal(dim)).astype(F32)
    releases = [(release_scale * rng.standard_normal(dim)).astype(F32) for _ in range(steps)]
    after = stepper(theta, releases, lr)
    delta = after - theta  # the server's float32 subtraction
    exact = -lr * np.sum([r.astype(np.float64) for r in releases], axis=0)
    for ord_ in (1, 2):
        error = np.linalg.norm(delta.astype(np.float64) - exact, ord=ord_)
        step = lr * max(np.linalg.norm(r.astype(np.float64), ord=ord_) for r in releases)
        bound = roundoff_bound(
            float(np.linalg.norm(theta.astype(np.float64), ord=ord_)), step, steps,
            float(np.linalg.norm(delta.astype(np.float64), ord=ord_)),
        )  # fmt: skip
        assert error <= bound
        assert bound < 60 * steps * error  # a bound, not a blanket


def test_norm_tolerance_covers_the_float32_vmf_sampler():
    dim, worst = 13_700, 0.0
    rho = norm_tolerance(dim)
    gen = torch.Generator().manual_seed(3)
    for kappa in (1.0, 100.0, 1e4, 1e6):
        mean = torch.randn(dim, generator=gen)
        mean /= torch.linalg.vector_norm(mean)
        y = sample_vmf(mean.to(torch.float32), kappa, gen, num_samples=10)
        norms = np.linalg.norm(y.numpy().astype(np.float64), axis=1)
        worst = max(worst, float(np.max(np.abs(norms - 1.0))))
    assert worst <= rho
    assert worst < rho / 100  # measured ~1e-7 against ρ ≈ 1.6e-3: the bound is worst-case


def test_norm_tolerance_covers_float32_clipping_and_summing():
    dim, count, bound = 13_700, 256, 0.7
    gen = torch.Generator().manual_seed(4)
    direction = torch.randn(dim, generator=gen, dtype=torch.float64)
    scales = torch.logspace(0, 4, count, dtype=torch.float64)[:, None]
    grads = (scales * direction / direction.norm()).to(torch.float32)  # aligned, norms ≥ C
    clipped = clip_flat(grads, bound)
    row_norms = np.linalg.norm(clipped.numpy().astype(np.float64), axis=1)
    total = np.linalg.norm(clipped.sum(0).numpy().astype(np.float64))
    assert np.all(row_norms <= bound * (1 + norm_tolerance(dim, 1)))
    assert total <= count * bound * (1 + norm_tolerance(dim, count))


@pytest.mark.parametrize(("lr", "theta_scale"), [(0.1, 0.1), (1e-3, 1.0)])
def test_vmf_release_through_fedpriv_passes_and_a_wrong_scale_fails(lr, theta_scale):
    """fedpriv's VMF mechanism in float32, one torch SGD step, then verify_vmf: the honest
    scale passes, a 5% wrong one fails. The tolerance is ρ·s plus ≈ u·(‖θ‖ + ‖θ'‖)/η: 0.3% at
    η = 0.1 and ‖θ‖ ≈ 12, 1.6% at η = 10⁻³ and ‖θ‖ ≈ 117."""
    dim, scale = 13_700, 0.5
    mechanism = build_mechanism("vmf", {"clip": 1.0, "kappa": 100.0, "vmf_scale": scale})
    gen = make_generator(5, 0, 1)
    grads = torch.randn(32, dim, generator=gen)
    theta = (theta_scale * torch.randn(dim, generator=gen)).numpy()
    release = mechanism.privatize(PerExampleGradients(grads), gen, batch_size=32.0).numpy()
    after = _torch_steps(theta, [release], lr)
    update = client_update(
        theta, after, lr=lr, steps=1, batch_size=32.0, records=record_count(1, batch_sizes=[32])
    )
    honest = verify_vmf(update, scale=scale, clip_bound=1.0)
    assert honest.status == "consistent"
    assert honest.statistic["vmf-norm.tolerance"] < 0.02 * scale
    for wrong in (0.95 * scale, 1.05 * scale):
        assert verify_vmf(update, scale=wrong, clip_bound=1.0).status == "inconsistent"
