import torch
import torch.nn.functional as F

from fedpriv.models import build_model
from fedpriv.training import per_example_gradients, sample_batch


def _loop_gradients(model, x, y):
    rows = []
    for xi, yi in zip(x, y, strict=True):
        model.zero_grad()
        F.cross_entropy(model(xi[None]), yi[None]).backward()
        rows.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    return torch.stack(rows)


def test_vmap_per_example_gradients_match_a_per_example_loop():
    torch.manual_seed(0)
    for name, shape in [("paper-mlp", (1, 16, 16)), ("small-cnn", (1, 28, 28))]:
        model = build_model(name, shape)
        x, y = torch.rand(6, *shape), torch.randint(0, 10, (6,))
        fast, losses = per_example_gradients(model, x, y)
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
