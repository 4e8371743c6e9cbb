"""Steps mode (``audit.release = "steps"``): the update recomposed from its step releases, every
step tested alone (fedpriv/verification/steps.py, strategies/step_releases.py).

The composition's round-off bound is checked against torch's own float32 optimiser (the
independent computation): honest training always lies inside it, and a change of a few bounds'
worth is caught. The power claim — noise × 0.3 at 20 local steps, which the multi-step update
test cannot see — is checked on the same training in both modes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord

from fedpriv.audit.config import AuditConfig, check_release_size
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism
from fedpriv.models import build_model
from fedpriv.protocol import ClientReport, sampling_rate
from fedpriv.training import LocalOptimizer, local_train
from fedpriv.verification import verify_update
from fedpriv.verification.steps import check_composition, verify_steps
from strategies.step_releases import first_step_view, read_steps
from workflows.config import load_config

N, L, K, LR = 180, 32, 20, 4.0
OPTIMIZERS = {
    "sgd": LocalOptimizer(),
    "momentum": LocalOptimizer("sgd", 0.9),
    "nesterov-decay": LocalOptimizer("sgd", 0.9, True, 0.01),
}


MECHANISMS = {
    "gaussian": {"noise_multiplier": 1.0, "clip": 1.0},
    "laplace": {"laplace_scale": 1.0, "clip": 1.0},
    "vmf": {"kappa": 100.0, "clip": 1.0},
    "clip": {"clip": 1.0},
}


def _train(optimizer: LocalOptimizer, factor: float = 1.0, seed: int = 1, steps: int = K,
           mechanism: str = "gaussian", lr: float = LR):
    """One client's honest (``factor`` = 1) or under-noised (Gaussian σ × ``factor``) round of
    the quickstart's model: (θ, θ_client, releases (k, p), the report declaring it honestly)."""
    torch.manual_seed(seed)
    x, y = torch.rand(N, 1, 16, 16), torch.randint(0, 10, (N,))
    model = build_model("paper-mlp", (1, 16, 16), 10)
    theta = [p.detach().numpy().copy() for p in model.parameters()]
    declared = build_mechanism(mechanism, MECHANISMS[mechanism])
    trained = declared if factor == 1.0 else build_mechanism(
        "gaussian", {"noise_multiplier": factor, "clip": 1.0})
    result = local_train(model, x, y, trained, lr=lr, local_steps=steps, batch_size=L,
                         sampling="poisson", generator=torch.Generator().manual_seed(seed),
                         optimizer=optimizer, keep_releases=True)
    after = [p.detach().numpy().copy() for p in model.parameters()]
    report = ClientReport(partition_id=0, server_round=1, local_examples=N, local_steps=steps,
                          lr=lr, batch_size=float(L), sampling="poisson",
                          sample_rate=sampling_rate(N, L), mechanism=declared,
                          optimizer=optimizer.settings)
    return theta, after, torch.stack(result.releases).numpy(), report


def _verify(theta, after, releases, report, alpha: float = 1e-6):  # noqa: ANN001, ANN202
    return verify_steps(report.declaration(), theta, after, releases, report.mechanism.verify,
                        alpha=alpha)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_honest_steps_compose_within_the_bound_and_every_step_is_tested(name, seed) -> None:
    theta, after, releases, report = _train(OPTIMIZERS[name], seed=seed)
    verdict = _verify(theta, after, releases, report)
    assert verdict.status == "consistent", verdict.reason
    parts = {p.test: p for p in verdict.parts}
    composition, steps = parts["composition"], parts["steps"]
    assert composition.status == "consistent"
    assert 0 < composition.statistic["gap_over_bound"] < 1  # torch's float32 lies inside
    assert steps.statistic["tested"] == K and len(steps.parts) == K
    assert all(p.status == "consistent" for p in steps.parts)
    # the family-wise rate: each step at alpha/k, so the round's sum is that of one update
    assert steps.statistic["alpha_per_step"] == pytest.approx(1e-6 / K)
    assert verdict.alpha == pytest.approx(sum(p.alpha for p in steps.parts))


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_every_mechanism_is_verified_step_by_step(mechanism) -> None:
    theta, after, releases, report = _train(LocalOptimizer(), mechanism=mechanism, lr=0.5)
    verdict = _verify(theta, after, releases, report)
    assert verdict.status == "consistent", verdict.reason
    assert {p.test: p for p in verdict.parts}["steps"].statistic["tested"] == K


@pytest.mark.slow
def test_no_false_alarm_in_120_honest_client_rounds() -> None:
    """120 honest steps-mode client-rounds (4 mechanisms × 3 optimisers × 10 seeds): none is
    inconsistent (at α = 10⁻⁶ per round the chance of one is about 10⁻⁴), and no composition
    comes within a factor 2 of its round-off bound."""
    worst, bad = 0.0, []
    for mechanism in sorted(MECHANISMS):
        for name, optimizer in sorted(OPTIMIZERS.items()):
            for seed in range(10, 20):
                theta, after, releases, report = _train(optimizer, seed=seed,
                                                        mechanism=mechanism, lr=0.5)
                verdict = _verify(theta, after, releases, report)
                if verdict.status != "consistent":
                    bad.append((mechanism, name, seed, verdict.reason))
                parts = {p.test: p for p in verdict.parts}
                worst = max(worst, parts["composition"].statistic["gap_over_bound"])
    assert not bad, bad
    assert worst < 0.5


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_update_that_is_not_the_composition_is_inconsistent(name) -> None:
    theta, after, releases, report = _train(OPTIMIZERS[name])
    bound = check_composition(theta, after, releases, lr=LR, optimizer=report.optimizer)
    assert bound.status == "consistent"
    changed = releases.copy()
    changed[7] *= 0.99  # step 8 sent 1 % smaller than the one trained with
    verdict = _verify(theta, after, changed, report)
    assert verdict.status == "inconsistent" and verdict.p_value == 0.0
    assert "composition" in verdict.reason
    moved = [a.copy() for a in after]
    moved[1] = moved[1] + 1e-3  # the update, not the releases, moved by 1e-3
    assert _verify(theta, moved, releases, report).status == "inconsistent"
    assert _verify(theta, after, releases[:-1], report).status == "inconsistent"


def test_noise_times_0_3_at_20_steps_is_caught_in_steps_mode_only() -> None:
    for seed in (1, 2):
        theta, after, releases, report = _train(LocalOptimizer(), factor=0.3, seed=seed)
        update = verify_update(report.declaration(), theta, after, report.mechanism.verify,
                               alpha=1e-6)
        assert update.status == "consistent"  # what update mode cannot see (issue 25)
        steps = _verify(theta, after, releases, report)
        assert steps.status == "inconsistent"
        failed = {p.test: p for p in steps.parts}["steps"]
        assert failed.statistic["failed"] == K  # every single step is caught


def test_a_known_share_of_every_step_is_removed_before_its_test() -> None:
    """Canaries add ``Σc`` to every step's clipped sum: each release carries ``Σc/L`` beside
    the data's, which the server knows and removes (``offset``) before testing the step."""
    torch.manual_seed(5)
    x, y = torch.rand(N, 1, 16, 16), torch.randint(0, 10, (N,))
    model = build_model("paper-mlp", (1, 16, 16), 10)
    theta = [p.detach().numpy().copy() for p in model.parameters()]
    dim = sum(p.numel() for p in model.parameters())
    share = torch.zeros(dim)
    share[:500] = 10.0  # ‖Σc‖ = 224, against the noise's σC√p = 117: far outside the test
    mechanism = build_mechanism("gaussian", MECHANISMS["gaussian"])
    result = local_train(model, x, y, mechanism, lr=0.5, local_steps=5, batch_size=L,
                         sampling="poisson", generator=torch.Generator().manual_seed(5),
                         canaries=share, keep_releases=True)
    after = [p.detach().numpy().copy() for p in model.parameters()]
    report = ClientReport(partition_id=0, server_round=1, local_examples=N, local_steps=5,
                          lr=0.5, batch_size=float(L), sampling="poisson",
                          sample_rate=sampling_rate(N, L), mechanism=mechanism)
    releases = torch.stack(result.releases).numpy()
    offset = share.numpy().astype(np.float64) / report.divisor
    kept = verify_steps(report.declaration(), theta, after, releases, mechanism.verify,
                        alpha=1e-6, offset=offset)
    assert kept.status == "consistent", kept.reason
    assert _verify(theta, after, releases, report).status == "inconsistent"


def test_adam_is_not_recomposed() -> None:
    theta, after, releases, report = _train(LocalOptimizer("adam"), steps=3)
    verdict = _verify(theta, after, releases, report)
    assert verdict.status == "unverifiable"
    assert "composition" in verdict.reason


def test_the_attack_sees_the_first_step_alone() -> None:
    theta, _, releases, report = _train(LocalOptimizer(), steps=3)
    view = first_step_view(("paper-mlp", (1, 16, 16), 10), theta, releases, report)
    assert view.local_steps == 1 and not view.pseudo_gradient
    gradient = np.concatenate([g.ravel() for g in view.gradient()])
    np.testing.assert_allclose(gradient, releases[0], rtol=1e-5, atol=1e-7)
    shifted = first_step_view(("paper-mlp", (1, 16, 16), 10), theta, releases, report,
                              offset=releases[0])  # a share removed from the step
    assert np.abs(np.concatenate([g.ravel() for g in shifted.gradient()])).max() < 1e-6


# -- the boundary: the step releases' record ------------------------------------------------

BROADCAST = [np.zeros((3, 2), np.float32), np.zeros(4, np.float32)]
NAMES = ["a", "b"]


def _record(arrays: dict[str, np.ndarray]) -> ArrayRecord:
    return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in arrays.items()})


def test_a_conforming_record_is_read_in_order() -> None:
    a = np.arange(2 * 6, dtype=np.float32).reshape(2, 3, 2)
    b = -np.arange(2 * 4, dtype=np.float32).reshape(2, 4)
    out = read_steps(_record({"a": a, "b": b}), NAMES, BROADCAST, 2)
    assert isinstance(out, np.ndarray) and out.shape == (2, 10)
    np.testing.assert_array_equal(out[1], np.concatenate([a[1].ravel(), b[1]]))


@pytest.mark.parametrize("arrays, kind, words", [
    ({"a": np.zeros((1, 3, 2), np.float32), "b": np.zeros((1, 4), np.float32)}, "malformed",
     "steps = 2"),  # one step for two declared
    ({"a": np.zeros((2, 3, 2), np.float64), "b": np.zeros((2, 4), np.float32)}, "malformed",
     "dtypes"),
    ({"b": np.zeros((2, 4), np.float32), "a": np.zeros((2, 3, 2), np.float32)}, "malformed",
     "names"),
    ({"a": np.full((2, 3, 2), np.nan, np.float32), "b": np.zeros((2, 4), np.float32)},
     "non-finite", "NaN"),
])  # fmt: skip
def test_a_record_that_does_not_conform_is_the_clients_failure(arrays, kind, words) -> None:
    out = read_steps(_record(arrays), NAMES, BROADCAST, 2)
    assert isinstance(out, tuple) and out[0] == kind and words in out[1], out


def test_too_many_steps_are_refused_before_reading() -> None:
    record = _record({"a": np.zeros((1, 3, 2), np.float32), "b": np.zeros((1, 4), np.float32)})
    out = read_steps(record, NAMES, BROADCAST, 10**8)  # 10⁸ × 40 bytes > the limit
    assert isinstance(out, tuple) and "over the limit" in out[1]


# -- the config --------------------------------------------------------------------------------

def test_the_key_is_validated_by_name() -> None:
    with pytest.raises(InputError, match="audit.release"):
        load_config(None, ["audit.release=everything"])
    with pytest.raises(InputError, match="audit.release"):
        load_config(None, ["audit.release=steps", "audit.enabled=false"])
    with pytest.raises(InputError, match="audit.release"):
        load_config(None, ["audit.release=steps", "strategy.name=fedprox",
                           "strategy.proximal_mu=0.1"])
    with pytest.raises(InputError, match="audit.release"):
        load_config(None, ["audit.release=steps", "mechanism.name=client-gaussian"])
    assert load_config(None, ["audit.release=steps"]).audit.release == "steps"
    assert load_config(None).audit.release == "update"


def test_the_size_of_a_reply_is_bounded_at_config_time() -> None:
    steps = AuditConfig(release="steps")
    check_release_size(steps, 20, 13_700)  # the quickstart: 1.1 MB a reply
    check_release_size(AuditConfig(), 100_000, 10**7)  # update mode sends no steps
    with pytest.raises(InputError, match="audit.release.*MiB"):
        check_release_size(steps, 100_000, 10**6)
