"""The public API for people's own apps: every exported name resolves, ``__all__`` is sorted,
and fedpriv's DP-SGD runs on a user's own model, loss and data loader, declaring itself."""

import importlib

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fedpriv.gradients import gradient_source
from fedpriv.mechanisms import build_mechanism
from fedpriv.protocol import ClientReport
from fedpriv.training import local_train, private_train

PACKAGES = ["fedpriv.gradients", "fedpriv.models", "fedpriv.training", "strategies"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_all_is_sorted(package):
    module = importlib.import_module(package)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def _data(n=40, features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    return x, (x[:, 0] > 0).long()


def _net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2))


def test_per_example_gradients_of_a_users_loss_match_autograd_one_by_one():
    """The loss reaches both gradient routes: an all-linear model's factors and ``vmap``."""
    x, y = _data(6)

    def loss(out, target):  # per-example squared error against one-hot targets
        return ((out - nn.functional.one_hot(target, 2).float()) ** 2).sum(dim=1)

    for model in (_net(), nn.Sequential(nn.Linear(5, 2))):
        got = gradient_source(model, x, y, loss).per_example()
        for i in range(x.shape[0]):
            model.zero_grad()
            loss(model(x[i : i + 1]), y[i : i + 1]).sum().backward()
            want = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            torch.testing.assert_close(got[i], want, rtol=1e-5, atol=1e-6)


def test_private_train_on_a_loader_is_local_train_and_declares_itself():
    x, y = _data()
    mechanism = build_mechanism("gaussian", {"noise_multiplier": 1.0, "clip": 1.0})
    loader = DataLoader(TensorDataset(x, y), batch_size=7)
    mine, ref = _net(), _net()
    out = private_train(mine, loader, mechanism, lr=0.1, local_steps=3, batch_size=8,
                        generator=torch.Generator().manual_seed(5), partition_id=3,
                        server_round=2, loss=nn.CrossEntropyLoss(reduction="none"))
    local_train(ref, x, y, mechanism, lr=0.1, local_steps=3, batch_size=8, sampling="poisson",
                generator=torch.Generator().manual_seed(5))
    for a, b in zip(mine.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    report = out.report
    assert (report.partition_id, report.server_round, report.local_examples) == (3, 2, 40)
    assert report.local_steps == out.result.steps == 3 and report.sample_rate == 8 / 40
    assert report.mechanism is mechanism
    assert ClientReport.from_config(report.to_config()).mechanism == mechanism


def test_audit_strategy_refuses_what_a_users_server_cannot_do(tmp_path):
    from flwr.serverapp.strategy import FedAvg

    from fedpriv.errors import InputError
    from strategies import audit_strategy

    with pytest.raises(InputError, match="audit.ground_truth"):
        audit_strategy(FedAvg(), run_dir=tmp_path, num_clients=2, audit={"ground_truth": True})
    with pytest.raises(InputError, match="audit.delta"):
        audit_strategy(FedAvg(), run_dir=tmp_path, num_clients=2, audit={"delta": 2.0})
    assert not list(tmp_path.iterdir())  # refused before anything is written
