import pytest
import torch
import torch.nn.functional as F

from fedpriv.gradients import PerExampleGradients, per_example_gradients, vmap_per_example_gradients
from fedpriv.models import build_model
from fedpriv.training import sample_batch


def _loop_gradients(model, x, y):
    rows = []
    for xi, yi in zip(x, y, strict=True):
        model.zero_grad()
        F.cross_entropy(model(xi[None]), yi[None]).backward()
        rows.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    return torch.stack(rows)


@pytest.mark.parametrize("route", [per_example_gradients, vmap_per_example_gradients])
def test_per_example_gradients_match_a_per_example_loop(route):
    torch.manual_seed(0)
    for name, shape in [("paper-mlp", (1, 16, 16)), ("small-cnn", (1, 28, 28))]:
        model = build_model(name, shape)
        x, y = torch.rand(6, *shape), torch.randint(0, 10, (6,))
        fast, losses = route(model, x, y)
        slow = _loop_gradients(model, x, y)
        assert fast.shape == slow.shape == (6, sum(p.numel() for p in model.parameters()))
        torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(losses, F.cross_entropy(model(x), y, reduction="none"))


def test_poisson_batches_have_rate_q_and_fixed_batches_have_size_l():
    g = torch.Generator().manual_seed(1)
    sizes = [sample_batch(1000, 50, "poisson", g).numel() for _ in range(400)]
    mean = sum(sizes) / len(sizes)
    # Binomial(1000, 0.05): mean 50, std of the mean sqrt(47.5/400) ≈ 0.34
    assert abs(mean - 50) < 4 * (47.5 / 400) ** 0.5
    fixed = sample_batch(1000, 50, "fixed", g)
    assert fixed.numel() == 50 and fixed.unique().numel() == 50


def test_an_empty_poisson_batch_still_releases_noise():
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.training import local_train

    model = build_model("paper-mlp", (1, 16, 16))
    before = torch.cat([p.detach().flatten() for p in model.parameters()])
    grads, losses = per_example_gradients(model, torch.zeros(0, 1, 16, 16), torch.zeros(0).long())
    assert grads.shape == (0, 13_700) and losses.shape == (0,)
    x, y = torch.rand(3, 1, 16, 16), torch.randint(0, 10, (3,))
    mech = build_mechanism("gaussian", {"noise_multiplier": 1.0})
    g = torch.Generator().manual_seed(2)  # with q = 1/3 this seed samples no record
    result = local_train(model, x, y, mech, lr=1.0, local_steps=1, batch_size=1,
                         sampling="poisson", generator=g)
    assert result.batch_sizes == [0]
    # the step is pure noise of std lr·σC/L = 1 over 13,700 coordinates
    step = torch.cat([p.detach().flatten() for p in model.parameters()]) - before
    assert 0.97 < float(step.std()) < 1.03


@pytest.mark.parametrize("name", ["clip", "gaussian", "laplace", "vmf"])
@pytest.mark.parametrize("per_layer", [False, True])
def test_ghost_route_releases_exactly_what_privatize_releases(name, per_layer):
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.training import private_release

    torch.manual_seed(3)
    model = build_model("paper-mlp", (1, 16, 16))
    x, y = torch.rand(32, 1, 16, 16) * 4, torch.randint(0, 10, (32,))  # large inputs: clipped
    params = {"clip": 0.5, **({"clip_per_layer": [0.3, 0.2, 0.1]} if per_layer else {})}
    mech = build_mechanism(name, params)
    sizes = [p.numel() for p in model.parameters()]
    grads, _ = vmap_per_example_gradients(model, x, y)
    expected = mech.privatize(
        PerExampleGradients(grads, None, tuple(sizes)), torch.Generator().manual_seed(9),
        batch_size=32.0,
    )
    got, losses = private_release(
        model, x, y, mech, torch.Generator().manual_seed(9), batch_size=32.0
    )
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert losses.shape == (32,)


def _biased_tanh_mlp() -> torch.nn.Module:
    torch.manual_seed(4)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(256, 12), torch.nn.Tanh(),
                               torch.nn.Linear(12, 10))


@pytest.mark.parametrize("make", [
    lambda: build_model("paper-mlp", (1, 16, 16)),
    lambda: build_model("paper-mlp-standardized", (1, 16, 16)),
    _biased_tanh_mlp,
    lambda: build_model("small-cnn", (1, 16, 16)),
])
def test_the_step_local_train_takes_releases_what_the_general_route_releases(make):
    """The production step as ``local_train`` takes it (the model walked once, its layout
    handed to each batch): the Gaussian release of ``torch.func`` per-example gradients through
    ``privatize`` from the same generator state, on all-linear models (factor route, to
    round-off) and on a convolutional one (the general route itself, bit for bit)."""
    from fedpriv.gradients import gradient_source, is_all_linear
    from fedpriv.gradients.linear import parameter_layout
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.training import private_release

    model = make()
    torch.manual_seed(5)
    x, y = torch.rand(24, 1, 16, 16) * 3, torch.randint(0, 10, (24,))
    mech = build_mechanism("gaussian", {"clip": 0.4, "noise_multiplier": 0.8})
    sizes = tuple(p.numel() for p in model.parameters())
    grads, _ = vmap_per_example_gradients(model, x, y)
    expected = mech.privatize(PerExampleGradients(grads, None, sizes),
                              torch.Generator().manual_seed(11), batch_size=24.0)
    layout = parameter_layout(model)
    got, _ = private_release(model, x, y, mech, torch.Generator().manual_seed(11),
                             batch_size=24.0, layout=layout)
    routed = type(gradient_source(model, x, y, layout=layout)).__name__
    if is_all_linear(model):
        assert routed == "LinearFactorGradients"
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    else:
        assert routed == "PerExampleGradients"
        assert torch.equal(got, expected)
