"""Clipping: norms ≤ C after clipping, unclipped examples untouched, per-layer bounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fedpriv.gradients.clipping import clip_flat, clip_per_layer, clipped_sum


def _grads(seed: int, batch: int = 64, dim: int = 40) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    scales = torch.logspace(-2, 2, batch, dtype=torch.float64)[:, None]
    return scales * torch.randn(batch, dim, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("norm_ord", [1, 2])
def test_clip_flat_bounds_and_leaves_small_examples_alone(norm_ord: int) -> None:
    grads, bound = _grads(0), 1.5
    clipped = clip_flat(grads, bound, norm_ord)
    before = torch.linalg.vector_norm(grads, ord=norm_ord, dim=1)
    after = torch.linalg.vector_norm(clipped, ord=norm_ord, dim=1)
    small = before <= bound
    assert 0 < int(small.sum()) < len(grads)
    assert torch.equal(clipped[small], grads[small])
    np.testing.assert_allclose(after[~small].numpy(), bound, rtol=1e-12)
    # Clipping rescales: every clipped row is a positive multiple of the original.
    cosine = torch.nn.functional.cosine_similarity(clipped[~small], grads[~small])
    np.testing.assert_allclose(cosine.numpy(), 1.0, rtol=1e-12)


def test_clip_flat_float32_and_zero_rows() -> None:
    grads = _grads(1).float()
    grads[3] = 0.0
    clipped = clip_flat(grads, 0.2)
    assert clipped.dtype == torch.float32 and torch.isfinite(clipped).all()
    assert torch.equal(clipped[3], torch.zeros(40))
    assert float(clipped.norm(dim=1).max()) <= 0.2 * (1 + 1e-6)


def test_empty_batch() -> None:
    assert clip_flat(torch.zeros(0, 5), 1.0).shape == (0, 5)
    assert clip_per_layer(torch.zeros(0, 5), [2, 3], [1.0, 1.0]).shape == (0, 5)


@pytest.mark.parametrize("norm_ord", [1, 2])
def test_clip_per_layer_bounds_each_layer(norm_ord: int) -> None:
    grads, sizes, bounds = _grads(2, dim=30), [5, 15, 10], [0.5, 2.0, 1.0]
    clipped = clip_per_layer(grads, sizes, bounds, norm_ord)
    for block_in, block_out, bound in zip(
        grads.split(sizes, 1), clipped.split(sizes, 1), bounds, strict=True
    ):
        norms_in = torch.linalg.vector_norm(block_in, ord=norm_ord, dim=1)
        norms_out = torch.linalg.vector_norm(block_out, ord=norm_ord, dim=1)
        assert float(norms_out.max()) <= bound * (1 + 1e-12)
        assert torch.equal(block_out[norms_in <= bound], block_in[norms_in <= bound])
    overall = torch.linalg.vector_norm(clipped, ord=norm_ord, dim=1)
    assert float(overall.max()) <= np.linalg.norm(bounds, ord=norm_ord) * (1 + 1e-12)


@pytest.mark.parametrize("norm_ord", [1, 2])
def test_clipped_sum_matches_summed_clipped_rows(norm_ord: int) -> None:
    grads, sizes, bounds = _grads(3, dim=30), [5, 15, 10], [0.5, 2.0, 1.0]
    flat = clipped_sum(grads, [1.5], None, norm_ord)
    torch.testing.assert_close(flat, clip_flat(grads, 1.5, norm_ord).sum(0), rtol=1e-12, atol=0)
    layered = clipped_sum(grads, bounds, sizes, norm_ord)
    expected = clip_per_layer(grads, sizes, bounds, norm_ord).sum(0)
    torch.testing.assert_close(layered, expected, rtol=1e-12, atol=0)
    assert torch.equal(clipped_sum(torch.zeros(0, 4), [1.0]), torch.zeros(4))


def test_clip_per_layer_shape_mismatch() -> None:
    with pytest.raises(ValueError):
        clip_per_layer(torch.zeros(2, 5), [2, 2], [1.0, 1.0])
    with pytest.raises(ValueError):
        clip_per_layer(torch.zeros(2, 4), [2, 2], [1.0])
    with pytest.raises(ValueError):
        clipped_sum(torch.zeros(2, 5), [1.0, 1.0], [2, 2])


@settings(max_examples=60, deadline=None)
@given(
    grads=arrays(np.float64, (4, 7), elements=st.floats(-1e6, 1e6)),
    bound=st.floats(1e-3, 1e3),
    norm_ord=st.sampled_from([1, 2]),
)
@example(grads=np.eye(4, 7) * 1.9, bound=1.9, norm_ord=1)  # C/C must be exactly 1 (torch 2.15)
@example(grads=np.eye(4, 7) * 1.9, bound=1.9, norm_ord=2)
def test_clip_flat_property(grads: np.ndarray, bound: float, norm_ord: int) -> None:
    clipped = clip_flat(torch.from_numpy(grads), bound, norm_ord).numpy()
    norms = np.linalg.norm(clipped, ord=norm_ord, axis=1)
    assert np.all(norms <= bound * (1 + 1e-12))
    small = np.linalg.norm(grads, ord=norm_ord, axis=1) <= bound
    assert np.array_equal(clipped[small], grads[small])
