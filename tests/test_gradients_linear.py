"""Outer-product per-example gradients and ghost clipping, checked against independent routes:
``torch.func.vmap`` (fedpriv.gradients.vmap_per_example_gradients) and clipping of the
materialised per-example gradients (fedpriv.gradients.clipping.clipped_sum)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedpriv.gradients import vmap_per_example_gradients as per_example_gradients
from fedpriv.gradients.clipping import clipped_sum, ghost_clipped_sum
from fedpriv.gradients.linear import (
    is_all_linear,
    linear_factors,
    linear_per_example_gradients,
    parameter_layout,
)
from fedpriv.gradients.source import LinearFactorGradients, gradient_source
from fedpriv.models.mlp import PaperMLP


def _batch(batch: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` random 16×16 grey images and labels."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(batch, 1, 16, 16, generator=gen, dtype=dtype)
    return x, torch.randint(0, 10, (batch,), generator=gen)


def _paper_mlp(dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(1)
    return PaperMLP().to(dtype)


def _standardized_mlp(dtype: torch.dtype = torch.float32) -> nn.Module:
    """The paper MLP behind its input standardisation: the factors must see (x − μ)/σ."""
    torch.manual_seed(3)
    return PaperMLP(input_mean=0.3, input_std=0.25).to(dtype)


def _biased_mlp(dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(2)
    return nn.Sequential(
        nn.Flatten(), nn.Linear(256, 20), nn.Tanh(), nn.Linear(20, 10, bias=True)
    ).to(dtype)


@pytest.mark.parametrize("make", [_paper_mlp, _standardized_mlp, _biased_mlp])
def test_matches_vmap_to_1e6(make):
    model = make()
    x, y = _batch(33, torch.float32)
    expected, expected_losses = per_example_gradients(model, x, y)
    got, losses = linear_per_example_gradients(model, x, y)
    assert got.shape == expected.shape == (33, sum(p.numel() for p in model.parameters()))
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(losses, expected_losses, atol=1e-6, rtol=0)


def test_batch_of_one_matches_autograd():
    """B = 1: the per-example gradient is the ordinary gradient of the loss."""
    model = _paper_mlp(torch.float64)
    x, y = _batch(1, torch.float64, seed=3)
    loss = nn.functional.cross_entropy(model(x), y)
    expected = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, model.parameters())])
    got, _ = linear_per_example_gradients(model, x, y)
    torch.testing.assert_close(got[0], expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("norm_ord", [1, 2])
@pytest.mark.parametrize("per_layer", [False, True])
@pytest.mark.parametrize("make", [_paper_mlp, _biased_mlp])
def test_ghost_clipped_sum_matches_materialised(norm_ord, per_layer, make):
    model = make(torch.float64)
    x, y = _batch(40, torch.float64, seed=4)
    grads, _ = per_example_gradients(model, x, y)
    sizes = [p.numel() for p in model.parameters()]
    norms = torch.linalg.vector_norm(grads, ord=norm_ord, dim=1)
    if per_layer:  # bounds near the median block norm: some examples clipped, some not
        blocks = grads.split(sizes, dim=1)
        bounds = [float(torch.linalg.vector_norm(b, ord=norm_ord, dim=1).median()) for b in blocks]
        expected = clipped_sum(grads, bounds, sizes, norm_ord)
    else:
        bounds = [float(norms.median())]
        expected = clipped_sum(grads, bounds, None, norm_ord)
    got = ghost_clipped_sum(linear_factors(model, x, y), bounds, norm_ord)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-10)


def test_ghost_clipped_sum_without_clipping_is_the_gradient_sum():
    model = _paper_mlp(torch.float64)
    x, y = _batch(16, torch.float64, seed=5)
    grads, _ = per_example_gradients(model, x, y)
    got = ghost_clipped_sum(linear_factors(model, x, y), [1e9])
    torch.testing.assert_close(got, grads.sum(dim=0), atol=1e-12, rtol=1e-10)


def test_is_all_linear_picks_the_route_explicitly():
    from fedpriv.models.cnn import SmallCNN

    assert is_all_linear(_paper_mlp()) and not is_all_linear(SmallCNN())


def test_rejects_non_linear_parameters():
    from fedpriv.models.cnn import SmallCNN

    with pytest.raises(ValueError, match="not linear"):
        linear_per_example_gradients(SmallCNN(), torch.rand(2, 1, 28, 28), torch.tensor([0, 1]))


def test_rejects_a_layer_used_twice():
    layer = nn.Linear(10, 10, bias=False)
    model = nn.Sequential(layer, nn.Sigmoid(), layer)
    with pytest.raises(ValueError, match="once"):
        linear_per_example_gradients(model, torch.rand(3, 10), torch.tensor([0, 1, 2]))


@pytest.mark.parametrize("norm_ord", [1, 2])
@pytest.mark.parametrize("per_layer", [False, True])
@pytest.mark.parametrize("make", [_paper_mlp, _biased_mlp])
def test_ghost_clipped_sum_is_bit_for_bit_the_sum_parameter_by_parameter(norm_ord, per_layer,
                                                                           make):
    """A layer's weight and bias share ``δ``: its norm and (flat clipping) its weighted rows
    are formed once for both, in float32 giving every bit that forming them for each
    parameter gives (the computation before issue 37 shared them)."""
    model = make()
    x, y = _batch(37, torch.float32, seed=9)
    factors = linear_factors(model, x, y)
    norm = torch.linalg.vector_norm
    blocks = torch.stack([norm(d, ord=norm_ord, dim=1) if a is None
                          else norm(d, ord=norm_ord, dim=1).mul_(norm(a, ord=norm_ord, dim=1))
                          for d, a in zip(factors.errors, factors.inputs, strict=True)], dim=1)
    if per_layer:
        bounds = blocks.median(dim=0).values.tolist()
        scales = torch.div(blocks.new_tensor(bounds), blocks).clamp_(max=1.0).split(1, dim=1)
    else:
        bounds = [float(norm(blocks, ord=norm_ord, dim=1).median())]
        scales = [torch.div(bounds[0], norm(blocks, ord=norm_ord, dim=1, keepdim=True))
                  .clamp_(max=1.0)] * blocks.shape[1]
    out = blocks.new_empty(sum(factors.widths))
    for d, a, s, part in zip(factors.errors, factors.inputs, scales,
                             out.split(factors.widths), strict=True):
        if a is None:
            torch.sum(d * s, dim=0, out=part)
        else:
            torch.mm((d * s).T, a, out=part.view(d.shape[1], a.shape[1]))
    assert torch.equal(ghost_clipped_sum(factors, bounds, norm_ord), out)


def test_ghost_rejects_wrong_number_of_bounds():
    model = _paper_mlp()
    x, y = _batch(4, torch.float32)
    with pytest.raises(ValueError, match="bounds"):
        ghost_clipped_sum(linear_factors(model, x, y), [1.0, 1.0])


def _tied_mlp() -> nn.Module:
    """A linear model whose first weight is held again by a later layer (tied weights)."""
    torch.manual_seed(3)
    first, second = nn.Linear(6, 6, bias=False), nn.Linear(6, 3)
    model = nn.Sequential(first, nn.Sigmoid(), nn.Sequential(nn.Linear(6, 6), second))
    model[2][0].weight = first.weight
    return model.double()


def test_parameter_layout_follows_parameter_order_and_sees_a_tied_weight():
    """One walk gives torch's own order, a tied parameter once, at its first owner."""
    model = _tied_mlp()
    layout = parameter_layout(model)
    first, middle, second = model[0], model[2][0], model[2][1]
    assert [p for _, _, p in layout.owners] == list(model.parameters())
    assert [(m, name) for m, name, _ in layout.owners] == [
        (first, "weight"), (middle, "bias"), (second, "weight"), (second, "bias")]
    assert layout.shared and not layout.all_linear and not is_all_linear(model)
    assert parameter_layout(_biased_mlp()).all_linear


def test_tied_weights_take_the_general_route():
    """A tied weight's per-example gradient is a sum of two outer products: the factor route
    refuses it, and the batch's source is the ``vmap`` one, which matches a per-example loop."""
    model = _tied_mlp()
    x, y = torch.rand(5, 6, dtype=torch.float64), torch.tensor([0, 1, 2, 0, 1])
    with pytest.raises(ValueError, match="shared"):
        linear_factors(model, x, y)
    source = gradient_source(model, x, y)
    assert not isinstance(source, LinearFactorGradients)
    for i in range(5):
        loss = nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        row = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, model.parameters())])
        torch.testing.assert_close(source.per_example()[i], row, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("per_layer", [False, True])
def test_an_example_exactly_at_the_bound_enters_unchanged(per_layer):
    """The factor ``min(1, C/‖g‖)`` is exactly 1 at ``‖g‖ = C`` (a correctly rounded division,
    not ``C · (1/‖g‖)``): clipping a single example to its own norm changes no bit of it."""
    model = _biased_mlp(torch.float64)
    x, y = _batch(12, torch.float64, seed=6)
    for i in range(12):
        factors = linear_factors(model, x[i : i + 1], y[i : i + 1])
        norm = torch.linalg.vector_norm
        blocks = torch.stack([norm(d, dim=1) if a is None else norm(d, dim=1) * norm(a, dim=1)
                              for d, a in zip(factors.errors, factors.inputs, strict=True)], dim=1)
        bounds = blocks[0].tolist() if per_layer else [float(torch.linalg.vector_norm(blocks[0]))]
        unclipped = LinearFactorGradients(factors).gradient_sum()
        assert torch.equal(ghost_clipped_sum(factors, bounds), unclipped)


def test_the_engine_call_gives_what_autograd_grad_gives():
    """``_grads_of_sum`` calls the autograd engine directly on the CPU: the same floats as
    ``torch.autograd.grad`` with ``grad_outputs = 1``, and the same refusal of an output the
    losses do not depend on."""
    from fedpriv.gradients.linear import _grads_of_sum

    model = _biased_mlp()
    x, y = _batch(9, torch.float32, seed=7)
    hidden = model[1](model[0](x))
    logits = model[3](model[2](hidden))
    losses = nn.functional.cross_entropy(logits, y, reduction="none")
    expected = torch.autograd.grad(losses, [hidden, logits],
                                   grad_outputs=torch.ones_like(losses), retain_graph=True)
    got = _grads_of_sum(losses, [hidden, logits])
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    unused = model[1](x.flatten(1))
    losses = nn.functional.cross_entropy(model(x), y, reduction="none")
    with pytest.raises(RuntimeError, match="not have been used"):
        _grads_of_sum(losses, [unused])


def test_recording_leaves_the_layers_as_they_were():
    """Each layer's ``forward`` is wrapped for one pass only: afterwards (also after an error)
    the layers call their class's ``forward`` again, a layer's own instance ``forward`` is put
    back, and a user's forward hook still runs and still sees every call. A model that is a
    single linear layer takes the factor route too."""
    model = _biased_mlp()
    first, second = model[1], model[3]
    calls = []
    second.register_forward_hook(lambda m, a, out: calls.append(out.shape))
    second.forward = second.forward  # an instance attribute of the layer's own
    own = second.__dict__["forward"]
    x, y = _batch(5, torch.float32, seed=8)
    linear_factors(model, x, y)
    assert "forward" not in first.__dict__ and second.__dict__["forward"] is own
    assert calls == [(5, 10)]
    with pytest.raises(ValueError, match="once"):
        linear_factors(model, x.reshape(5, 1, 256), y, loss=lambda out, t: model(x).sum(1))
    assert "forward" not in first.__dict__ and second.__dict__["forward"] is own
    single = nn.Linear(256, 10)
    flat = x.flatten(1)
    got, _ = linear_per_example_gradients(single, flat, y)
    expected, _ = per_example_gradients(single, flat, y)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_a_recorder_held_over_several_batches_gives_the_per_batch_factors():
    """One :class:`LayerRecorder` entered for several batches (as ``local_train`` holds it for
    its call) gives every batch the floats a recording of that batch alone gives, and leaves
    the layers as they were when it is left, also after an error inside."""
    from fedpriv.gradients.linear import LayerRecorder
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.training import local_train

    model = _biased_mlp()
    layout = parameter_layout(model)
    batches = [_batch(b, torch.float32, seed=10 + b) for b in (3, 8, 5)]
    alone = [linear_factors(model, x, y, layout=layout) for x, y in batches]
    with LayerRecorder(layout.layers) as recorder:
        held = [linear_factors(model, x, y, layout=layout, recorder=recorder)
                for x, y in batches]
    for a, b in zip(alone, held, strict=True):
        assert all(torch.equal(u, v) for u, v in zip(a.errors, b.errors, strict=True))
        assert all(u is v is None or torch.equal(u, v)
                   for u, v in zip(a.inputs, b.inputs, strict=True))
    assert not any("forward" in m.__dict__ for m in layout.layers)
    with pytest.raises(RuntimeError, match="inside"), LayerRecorder(layout.layers):
        raise RuntimeError("inside")
    assert not any("forward" in m.__dict__ for m in layout.layers)
    x, y = _batch(20, torch.float32, seed=11)
    local_train(model, x, y, build_mechanism("gaussian", {}), lr=0.1, local_steps=2,
                batch_size=5, sampling="fixed", generator=torch.Generator().manual_seed(0))
    assert not any("forward" in m.__dict__ for m in layout.layers)
