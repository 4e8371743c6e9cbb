"""verify_update on updates from fedpriv's own local training (fedpriv.training.local_train on
the paper MLP, p = 13,700, float32): the wiring the server will use — u = L·(−Δ/η) with
L = q·n, the declared batch sizes — holds for every mechanism, and a client that trains with
other parameters than it declares is caught."""

from __future__ import annotations

import pytest
import torch
from verification_support import Claim, verify

from fedpriv.mechanisms import build_mechanism, make_generator
from fedpriv.models import build_model
from fedpriv.training import local_train
from fedpriv.verification import Declaration, Verdict

N, BATCH, STEPS, LR = 200, 20, 2, 0.1
PARAMS = {
    "gaussian": {"noise_multiplier": 1.0},
    "laplace": {"laplace_scale": 1.0},
    "vmf": {"kappa": 100.0},
    "clip": {},
    "none": {},
}


def _train_and_verify(
    trained: tuple[str, dict], declared: tuple[str, dict], seed: int, steps: int = STEPS
) -> Verdict:
    gen = make_generator(seed, 0, 1)
    model = build_model("paper-mlp", (1, 16, 16))
    x, y = torch.rand(N, 1, 16, 16, generator=gen), torch.randint(0, 10, (N,), generator=gen)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    result = local_train(
        model, x, y, build_mechanism(*trained), lr=LR, local_steps=steps, batch_size=BATCH,
        sampling="poisson", generator=gen,
    )  # fmt: skip
    after = [p.detach().numpy() for p in model.parameters()]
    declaration = Declaration(
        sensitivity=build_mechanism(*declared).sensitivity,
        lr=LR,
        steps=result.steps,
        batch_size=result.sample_rate * N,
        local_size=N,
        sample_rate=result.sample_rate,
        batch_sizes=tuple(result.batch_sizes),
    )
    name, params = declared
    claim = Claim(declaration, name, {k: v for k, v in params.items() if k != "clip"})
    return verify(claim, before, after)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_honest_local_training_is_consistent(name):
    verdict = _train_and_verify((name, PARAMS[name]), (name, PARAMS[name]), seed=1)
    assert verdict.status == ("unverifiable" if name == "none" else "consistent"), verdict.reason


@pytest.mark.parametrize(
    ("trained", "declared"),
    [
        (("gaussian", {"noise_multiplier": 0.2}), ("gaussian", {"noise_multiplier": 5.0})),
        (("gaussian", {"noise_multiplier": 1.0}), ("laplace", {"laplace_scale": 0.7})),
        (("vmf", {"kappa": 100.0, "vmf_keep_norm": True}), ("vmf", {"kappa": 100.0})),
        (("vmf", {"kappa": 100.0, "vmf_scale": 2.0}), ("vmf", {"kappa": 100.0})),
        (("none", {}), ("clip", {"clip": 1e-3})),
    ],
)
def test_training_with_other_parameters_than_declared_is_caught(trained, declared):
    assert _train_and_verify(trained, declared, seed=2, steps=1).status == "inconsistent"
    if trained[0] != "vmf":  # over k = 2 steps VMF is only checked against ‖Σ r_t‖ ≤ 2s
        assert _train_and_verify(trained, declared, seed=2).status == "inconsistent"
