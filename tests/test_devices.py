"""The ``device`` setting: resolution, refusal before work, and device-agnostic training and
attacks. The project's machines have no GPU: the CUDA test runs only where CUDA exists."""

from __future__ import annotations

import pytest
import torch
from attacks_support import digits, mean_gradient_view

from attacks.registry import run_attack
from fedpriv.devices import resolve_device
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism, make_generator
from fedpriv.models import build_model
from fedpriv.training import local_train
from workflows.config import load_config
from workflows.simulation import check_runnable

CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("available", [True, False])
def test_auto_follows_cuda_availability(monkeypatch, available):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    assert resolve_device("auto").type == ("cuda" if available else "cpu")
    assert resolve_device("cpu").type == "cpu"


def test_cuda_without_cuda_and_unknown_names_are_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="device.*is_available"):
        resolve_device("cuda")
    with pytest.raises(InputError, match="attack.device"):
        resolve_device("gpu", "attack.device")
    with pytest.raises(InputError, match="'device'|device"):
        load_config(None, ["device='gpu'"])
    assert load_config(None).device == "cpu"  # the tested path is the default
    with pytest.raises(InputError, match="device"):  # before Ray or any work starts
        check_runnable(load_config(None, ["device='cuda'", "data.num_clients=2"]))


def _train_on(device: str) -> tuple[torch.Tensor, list[list[int]]]:
    x, y = digits(list(range(12)))
    model = build_model("paper-mlp", (1, 16, 16)).to(device)
    with torch.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.1, 0.1, p.numel()).view_as(p) * (k + 1))
    for name in ("gaussian", "laplace", "vmf"):
        mechanism = build_mechanism(name, {"clip": 1.0})
        result = local_train(model, x.to(device), y.to(device), mechanism, lr=0.5,
                             local_steps=2, batch_size=4, sampling="poisson",
                             generator=make_generator(0, 1, 1, device=device),
                             record_ids=list(range(100, 112)))
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return flat.cpu(), result.batch_indices


def test_training_on_the_cpu_device_object_keeps_everything_there():
    flat, batches = _train_on("cpu")
    again, same = _train_on("cpu")
    assert torch.equal(flat, again) and batches == same  # seeded: reproducible
    assert all(100 <= i < 112 for batch in batches for i in batch)  # ids map back on the CPU


@pytest.mark.skipif(not CUDA, reason="no CUDA device on this machine")
def test_training_and_attacks_run_on_cuda():
    flat, batches = _train_on("cuda")
    assert torch.isfinite(flat).all() and all(100 <= i < 112 for b in batches for i in b)
    x, y = digits([0])
    view = mean_gradient_view(x, y)
    for name in ("iga", "dlg", "idlg"):
        on_gpu = run_attack(name, view, iterations=5, seed=0, device="cuda")
        on_cpu = run_attack(name, view, iterations=5, seed=0, device="cpu")
        assert on_gpu.reconstructions.shape == on_cpu.reconstructions.shape
        assert (on_gpu.start == on_cpu.start).all()  # random starts drawn on the CPU


def test_attacks_take_the_device_key():
    x, y = digits([3])
    view = mean_gradient_view(x, y)
    a = run_attack("iga", view, iterations=3, seed=1, device="cpu")
    b = run_attack("iga", view, iterations=3, seed=1, device="auto" if not CUDA else "cpu")
    assert (a.reconstructions == b.reconstructions).all()
    with pytest.raises(InputError, match="attack.device"):
        run_attack("iga", view, iterations=1, device="tpu")
