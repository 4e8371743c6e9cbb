"""The local optimiser steps on the privatised gradient as Opacus does (weight decay, momentum and
Adam's moments after the noise), afresh every round; a one-client federation is centralised
DP-SGD step for step. The reference is a plain loop written here from the definitions: per-
example gradients one example at a time, flat clipping, Gaussian noise, and hand-written SGD /
Adam updates (Kingma & Ba 2015, Algorithm 1, with coupled L2 weight decay as torch.optim adds it).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism
from fedpriv.models import build_model
from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.protocol import ClientReport, ReplyError
from fedpriv.training import LocalOptimizer, local_train
from workflows.config import config_from_dict

SIGMA, CLIP = 1.0, 0.5


class HandSGD:
    """SGD with momentum μ (dampening 0), Nesterov, coupled weight decay λ."""

    def __init__(self, lr, momentum=0.0, nesterov=False, weight_decay=0.0):
        self.lr, self.mu, self.nesterov, self.wd = lr, momentum, nesterov, weight_decay
        self.buf = None

    def step(self, theta, g):
        g = g + self.wd * theta
        if self.mu:
            self.buf = g.clone() if self.buf is None else self.mu * self.buf + g
            g = g + self.mu * self.buf if self.nesterov else self.buf
        return theta - self.lr * g


class HandAdam:
    """Adam with bias correction, ε = 1e-8, and weight decay λ: coupled (``g ← g + λθ``, as
    torch.optim.Adam) or, with ``decoupled``, AdamW's ``θ ← θ(1 − ηλ)`` before the step."""

    def __init__(self, lr, betas=(0.9, 0.999), weight_decay=0.0, decoupled=False):
        self.lr, (self.b1, self.b2), self.wd, self.decoupled = lr, betas, weight_decay, decoupled
        self.m = self.v = None
        self.t = 0

    def step(self, theta, g):
        if self.decoupled:
            theta = theta * (1 - self.lr * self.wd)
        else:
            g = g + self.wd * theta
        self.t += 1
        if self.m is None:
            self.m, self.v = torch.zeros_like(g), torch.zeros_like(g)
        self.m = self.b1 * self.m + (1 - self.b1) * g
        self.v = self.b2 * self.v + (1 - self.b2) * g * g
        m_hat = self.m / (1 - self.b1**self.t)
        v_hat = self.v / (1 - self.b2**self.t)
        return theta - self.lr * m_hat / (v_hat.sqrt() + 1e-8)


def plain_dpsgd(model, theta, x, y, steps, batch_size, generator, optimizer):
    """Centralised DP-SGD from the definitions (Abadi et al. 2016, Alg. 1): Poisson batch at
    q = L/n, per-example gradients one by one, flat clipping to C, noise N(0, σ²C²I), ÷ L, then
    the optimiser on the noisy gradient. Returns θ after ``steps`` steps."""
    n, q = len(x), batch_size / len(x)
    for _ in range(steps):
        idx = torch.nonzero(torch.rand(n, generator=generator) < q).flatten()
        vector_to_parameters(theta, model.parameters())
        rows = []
        for i in idx:
            model.zero_grad()
            F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
            rows.append(parameters_to_vector(p.grad for p in model.parameters()))
        grads = torch.stack(rows) if rows else torch.zeros(0, theta.numel())
        scale = torch.clamp(grads.norm(dim=1) / CLIP, min=1.0)
        noise = torch.randn(theta.numel(), generator=generator)
        noisy = ((grads / scale[:, None]).sum(0) + SIGMA * CLIP * noise) / batch_size
        theta = optimizer.step(theta, noisy.detach())
    return theta


def assert_same_trajectory(got, expected, lr, steps):
    """Equal up to float32 rounding — except that Adam's step ``m̂/(√v̂ + ε)`` is ≈ sign(g) at
    first, so a coordinate whose noisy gradient lies within rounding of 0 may move by up to
    ``lr`` per step differently in two correct implementations (expected about once per 10⁵
    coordinate-steps at these noise levels). Allow that for one coordinate in a thousand."""
    off = (got - expected).abs() > 2e-6 + 1e-4 * expected.abs()
    assert int(off.sum()) <= max(1, got.numel() // 1000)
    assert float((got - expected).abs().max()) <= 2 * lr * steps


def _setup(seed=0, n=64):
    torch.manual_seed(seed)
    model = build_model("paper-mlp", (1, 16, 16))
    x, y = torch.rand(n, 1, 16, 16), torch.randint(0, 10, (n,))
    return model, x, y


CASES = {
    "adam+decay": (LocalOptimizer("adam", weight_decay=0.1, betas=(0.9, 0.99)),
                   lambda lr: HandAdam(lr, (0.9, 0.99), 0.1), 0.005),
    "adamw": (LocalOptimizer("adamw", weight_decay=0.1),
              lambda lr: HandAdam(lr, weight_decay=0.1, decoupled=True), 0.005),
    "sgd+momentum+decay": (LocalOptimizer("sgd", momentum=0.9, weight_decay=0.05),
                           lambda lr: HandSGD(lr, 0.9, False, 0.05), 0.5),
    "nesterov": (LocalOptimizer("sgd", momentum=0.5, nesterov=True),
                 lambda lr: HandSGD(lr, 0.5, True), 0.5),
    "plain sgd": (LocalOptimizer(), lambda lr: HandSGD(lr), 0.5),
}


@pytest.mark.parametrize("case", list(CASES))
def test_local_training_is_the_plain_dpsgd_loop_step_for_step(case):
    optimizer, hand, lr = CASES[case]
    model, x, y = _setup()
    theta0 = parameters_to_vector(model.parameters()).detach().clone()
    mech = build_mechanism("gaussian", {"noise_multiplier": SIGMA, "clip": CLIP})
    local_train(model, x, y, mech, lr=lr, local_steps=8, batch_size=16, sampling="poisson",
                generator=torch.Generator().manual_seed(5), optimizer=optimizer)
    got = parameters_to_vector(model.parameters()).detach()
    reference = build_model("paper-mlp", (1, 16, 16))
    expected = plain_dpsgd(reference, theta0, x, y, 8, 16, torch.Generator().manual_seed(5),
                           hand(lr))
    assert not torch.equal(got, theta0)
    assert_same_trajectory(got, expected, lr, 8)


def test_weight_decay_acts_after_the_noise_not_on_the_release():
    """One SGD step with decay λ: θ₁ = θ₀ − η(r + λθ₀), where r is the release of the same
    step without decay (same generator): the decay is post-processing of the release."""
    mech = build_mechanism("gaussian", {"noise_multiplier": SIGMA, "clip": CLIP})
    moved = []
    for decay in (0.0, 0.3):
        model, x, y = _setup()
        theta0 = parameters_to_vector(model.parameters()).detach().clone()
        local_train(model, x, y, mech, lr=0.5, local_steps=1, batch_size=16, sampling="poisson",
                    generator=torch.Generator().manual_seed(2),
                    optimizer=LocalOptimizer(weight_decay=decay))
        moved.append(parameters_to_vector(model.parameters()).detach() - theta0)
    release = -moved[0] / 0.5
    torch.testing.assert_close(moved[1], -0.5 * (release + 0.3 * theta0), rtol=1e-5, atol=1e-7)


def test_the_first_release_of_an_adam_round_is_what_a_one_step_sgd_probe_shows():
    """The sweep's probe: one SGD step at lr 1 from the same θ₀ with the same generator shows
    the server −Δ = the first release of the Adam round (the optimiser draws no randomness;
    batch and noise come first), up to the float32 rounding of θ₀ − (θ₀ − r)."""
    mech = build_mechanism("vmf", {"kappa": 100.0, "clip": CLIP})
    model, x, y = _setup()
    theta0 = parameters_to_vector(model.parameters()).detach().clone()
    local_train(model, x, y, mech, lr=1.0, local_steps=1, batch_size=16, sampling="poisson",
                generator=torch.Generator().manual_seed(7))
    probe = theta0 - parameters_to_vector(model.parameters()).detach()
    from fedpriv.training import private_release, sample_batch

    model, x, y = _setup()
    g = torch.Generator().manual_seed(7)
    idx = sample_batch(len(x), 16, "poisson", g)
    first, _ = private_release(model, x[idx], y[idx], mech, g, batch_size=16.0)
    ulp = torch.finfo(torch.float32).eps * float(theta0.abs().max() + first.abs().max())
    torch.testing.assert_close(probe, first, rtol=0, atol=ulp)
    assert math.isclose(float(first.norm()), CLIP, rel_tol=1e-5)  # VMF releases s·y, s = C


def test_the_optimiser_state_is_fresh_every_round():
    """Two calls (two rounds) of Adam = two hand-written Adam runs, each from zero moments."""
    mech = build_mechanism("gaussian", {"noise_multiplier": SIGMA, "clip": CLIP})
    opt = LocalOptimizer("adam", weight_decay=0.1)
    model, x, y = _setup()
    theta = parameters_to_vector(model.parameters()).detach().clone()
    reference = build_model("paper-mlp", (1, 16, 16))
    for rnd in (1, 2):
        local_train(model, x, y, mech, lr=0.01, local_steps=4, batch_size=16, sampling="poisson",
                    generator=torch.Generator().manual_seed(rnd), optimizer=opt)
        theta = plain_dpsgd(reference, theta, x, y, 4, 16, torch.Generator().manual_seed(rnd),
                            HandAdam(0.01, weight_decay=0.1))
    assert_same_trajectory(parameters_to_vector(model.parameters()).detach(), theta, 0.01, 8)


ONE_CLIENT = {
    "seed": 3, "rounds": 2,
    "data": {"name": "digits", "num_clients": 1},
    "train": {"batch_size": 64, "lr": 0.005, "local_steps": 5, "optimizer": "adam",
              "weight_decay": 0.1},
    "mechanism": {"name": "gaussian", "noise_multiplier": SIGMA, "clip": CLIP},
    "audit": {"attacks": []},
}  # fmt: skip


def test_a_one_client_federation_is_centralised_dpsgd_step_for_step(tmp_path):
    """The whole federated path — server, ClientApp, reply, FedAvg of one client, audit
    store — against the plain loop over the client's data, round by round."""
    from reliability_support import LocalGrid, faulty_client_app

    from clients.local_data import client_data
    from fedpriv.audit import StoreReader
    from fedpriv.seeding import make_generator
    from strategies.server_run import initial_model, run_federation

    cfg = config_from_dict(ONE_CLIENT)
    run_federation(LocalGrid(faulty_client_app({}), 1), cfg, tmp_path / "run")
    x, y, _ = client_data(cfg.data, cfg.seed, 0, 1)
    model = initial_model(cfg)
    theta = parameters_to_vector(model.parameters()).detach().clone()
    with StoreReader.open(tmp_path / "run", readonly=True) as store:
        for rnd in (1, 2):
            theta = plain_dpsgd(model, theta, x, y, 5, 64, make_generator(cfg.seed, 0, rnd),
                                HandAdam(0.005, weight_decay=0.1))
            stored = store.load_aggregate(rnd)
            got = torch.cat([torch.as_tensor(stored[k]).flatten() for k in
                             initial_model(cfg).state_dict()])
            assert_same_trajectory(got, theta, 0.005, 5 * rnd)


@pytest.mark.parametrize(
    ("train", "key"),
    [
        ({"optimizer": "lbfgs"}, "train.optimizer"),
        ({"optimizer": "adamw", "momentum": 0.5}, "train.momentum"),
        ({"optimizer": "adam", "momentum": 0.9}, "train.momentum"),
        ({"optimizer": "adam", "nesterov": True}, "train.nesterov"),
        ({"nesterov": True}, "train.nesterov"),
        ({"momentum": 1.0}, "train.momentum"),
        ({"weight_decay": -0.1}, "train.weight_decay"),
        ({"betas": [0.9]}, "train.betas"),
        ({"betas": [0.9, 1.0]}, "train.betas"),
    ],
)
def test_bad_optimiser_settings_name_the_key(train, key):
    with pytest.raises(InputError) as err:
        config_from_dict({"train": train})
    assert err.value.key == key


REPORT = {
    "partition-id": 0, "server-round": 1, "local-examples": 100, "steps": 2, "lr": 0.1,
    "batch-size": 10.0, "sampling": "poisson", "sample-rate": 0.1, "mechanism": "gaussian",
    "mechanism-params": '{"noise_multiplier": 1.0}',
}  # fmt: skip


def test_the_reply_carries_the_optimiser_and_defaults_to_plain_sgd():
    plain = ClientReport.from_config(REPORT)
    assert plain.optimizer == OptimizerSettings("sgd", 0.0, False, 0.0)
    sent = {**REPORT, "optimizer": "sgd", "momentum": 0.9, "weight-decay": 0.01,
            "nesterov": True}
    report = ClientReport.from_config(sent)
    assert ClientReport.from_config(report.to_config()) == report
    assert report.optimizer == OptimizerSettings("sgd", momentum=0.9, nesterov=True,
                                                 weight_decay=0.01)
    keys = ("optimizer", "momentum", "weight-decay", "nesterov")  # the wire format is unchanged
    assert {k: report.to_config()[k] for k in keys} == {k: sent[k] for k in keys}
    trained = LocalOptimizer("sgd", 0.9, True, 0.01, betas=(0.5, 0.6))
    assert trained.settings == report.optimizer  # what the client declares of what it trains with


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"optimizer": "lbfgs"}, "optimizer"),
        ({"momentum": 1.0}, "momentum"),
        ({"momentum": -0.1}, "momentum"),
        ({"weight-decay": float("nan")}, "weight-decay"),
        ({"nesterov": 1}, "nesterov"),
        ({"nesterov": True}, "nesterov"),
        ({"optimizer": "adam", "momentum": 0.5}, "momentum"),
    ],
)
def test_bad_optimiser_fields_in_a_reply_are_the_clients_error(extra, field):
    with pytest.raises(ReplyError) as err:
        ClientReport.from_config({**REPORT, **extra})
    assert err.value.field == field


@pytest.mark.parametrize(("settings", "status", "guarantee"), [
    (["train.optimizer='adamw'", "train.weight_decay=0.1"], "unverifiable", "declared"),
    (["train.momentum=0.9", "train.weight_decay=0.01"], "consistent", None),
])
def test_the_server_verifies_what_the_declared_optimiser_allows(tmp_path, settings, status,
                                                                guarantee):
    """The reply's optimiser reaches the verification: an Adam(W) update is not a scaled sum of
    releases, so it cannot be checked (not: contradicts its declaration); SGD with momentum and
    decay is, at one local step with a fresh buffer."""
    from label_support import assert_labelled_by_tests
    from reliability_support import QUICKSTART, LocalGrid, faulty_client_app

    from fedpriv.audit import AuditStore
    from fedpriv.training import local_optimizer
    from strategies.server_run import run_federation
    from workflows.config import load_config

    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=2", "train.local_steps=1",
                                   "audit.attacks=[]", *settings])
    report = run_federation(LocalGrid(faulty_client_app({}), 2), cfg, tmp_path / "run")
    assert report["status"] == "completed"
    for client in report["clients"]:
        assert client["verification"]["status"] == status, client["verification"]
        if guarantee is None:  # consistent: labelled by what its tests could show
            assert_labelled_by_tests(client)
        else:
            assert client["guarantee"] == guarantee
    with AuditStore.open(tmp_path / "run", readonly=True) as store:  # the report itself is kept
        declared = [u.report.optimizer for u in store.iter_updates()]
    assert declared == [local_optimizer(cfg.train).settings] * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_plain_sgd_steps_bit_for_bit_as_torch_optim_sgd(dtype):
    """The default optimiser (SGD, no momentum, no weight decay) is ``PlainSGD``: one foreach
    update, the same floats as ``torch.optim.SGD`` step after step; a parameter without a
    gradient is left alone by both."""
    from fedpriv.training.optimizers import PlainSGD

    torch.manual_seed(5)
    ours = build_model("paper-mlp", (1, 16, 16)).to(dtype)
    theirs = build_model("paper-mlp", (1, 16, 16)).to(dtype)
    theirs.load_state_dict(ours.state_dict())
    stepper = LocalOptimizer().build(ours.parameters(), 0.037)
    assert isinstance(stepper, PlainSGD)
    reference = torch.optim.SGD(theirs.parameters(), lr=0.037)
    gen = torch.Generator().manual_seed(6)
    for step in range(4):
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            g = torch.randn(a.shape, generator=gen, dtype=dtype)
            a.grad, b.grad = (None, None) if step == 2 and a.dim() and a.shape[0] == 15 else (
                g, g.clone())
        stepper.step()
        reference.step()
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            assert torch.equal(a, b)
    assert not isinstance(LocalOptimizer(momentum=0.9).build(ours.parameters(), 0.1), PlainSGD)
    assert not isinstance(LocalOptimizer(weight_decay=0.1).build(ours.parameters(), 0.1),
                          PlainSGD)
    stepper.zero_grad(), reference.zero_grad()  # as torch.optim's: every .grad cleared
    assert all(a.grad is None and b.grad is None
               for a, b in zip(ours.parameters(), theirs.parameters(), strict=True))
