"""Canaries in a run, piece by piece: the shared design, the client's insertion into local
DP-SGD, the server's removal and scores, the verdict's p-value, the settings' checks.

The end-to-end runs are in ``test_canaries_e2e.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.audit.config import CANARY_METHODS, CanaryConfig
from fedpriv.canaries import (
    CanaryDesign,
    canary_displacement,
    canary_epsilon,
    canary_sum,
    epsilon_one_run,
    gaussian_scores,
    laplace_scores,
    one_run_test,
    projections,
    round_design,
    vmf_scores,
)
from fedpriv.errors import InputError
from fedpriv.gradients import CanaryGradients, PerExampleGradients
from fedpriv.mechanisms import Mechanism, build_mechanism
from fedpriv.models import build_model
from fedpriv.seeding import make_generator
from fedpriv.training import local_train
from workflows.config import load_config

ON = CanaryConfig(enabled=True, count=100)
DIM = 13_700


def _design(settings: CanaryConfig, seed: int, mech: Mechanism, client: int, rnd: int,
            dim: int) -> CanaryDesign | None:
    """:func:`round_design` given the settings and the mechanism, as client and server call it."""
    return round_design(seed, client, rnd, dim, enabled=settings.enabled, count=settings.count,
                        kind=settings.kind, sensitivity=mech.sensitivity,
                        norm_ord=mech.norm_ord, additive=mech.additive)


def _flat(model: torch.nn.Module) -> np.ndarray:
    return torch.cat([p.detach().flatten() for p in model.parameters()]).double().numpy()


@pytest.mark.parametrize(("name", "params", "inserted"), [
    ("gaussian", {"noise_multiplier": 1.0}, True), ("laplace", {}, True), ("clip", {}, True),
    ("vmf", {"kappa": 100.0}, False), ("none", {}, False),
])  # fmt: skip
def test_canaries_go_where_their_share_can_be_removed(name, params, inserted):  # noqa: ANN001
    mech = build_mechanism(name, params)
    design = _design(ON, 7, mech, 3, 2, DIM)
    assert (design is not None) == inserted
    assert _design(CanaryConfig(), 7, mech, 3, 2, DIM) is None  # off by default
    if inserted:
        assert design == _design(ON, 7, mech, 3, 2, DIM)  # client and server agree
        assert (design.clip, design.norm) == (mech.sensitivity, mech.norm_ord)
        others = {_design(ON, s, mech, c, r, DIM).seed for s, c, r in
                  [(8, 3, 2), (7, 4, 2), (7, 3, 3)]}
        assert design.seed not in others and len(others) == 3  # fresh per seed, client, round


def test_more_coordinate_canaries_than_coordinates_name_the_setting():
    mech = build_mechanism("gaussian", {})
    with pytest.raises(InputError, match="audit.canaries.count"):
        _design(CanaryConfig(enabled=True, count=200), 0, mech, 0, 1, 150)
    assert _design(CanaryConfig(enabled=True, count=200, kind="random"), 0, mech, 0, 1, 150)


def test_canary_gradients_add_the_canaries_to_every_sum():
    grads = torch.randn(5, 40, dtype=torch.float32)
    inner = PerExampleGradients(grads, torch.zeros(5), (30, 10))
    canaries = torch.randn(40, dtype=torch.float64)
    source = CanaryGradients(inner, canaries)
    assert source.layer_sizes == (30, 10) and source.losses is inner.losses
    for got, want in ((source.gradient_sum(), inner.gradient_sum()),
                      (source.clipped_sum([1.0], 2), inner.clipped_sum([1.0], 2)),
                      (source.clipped_sum([0.5, 0.5], 1), inner.clipped_sum([0.5, 0.5], 1))):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want + canaries.float())


def _train(mech, canaries, steps: int, lr: float = 0.5) -> np.ndarray:  # noqa: ANN001
    """Δ of one client's local DP-SGD on fixed data (same seed, so the same noise)."""
    torch.manual_seed(0)
    model = build_model("paper-mlp", (1, 16, 16))
    x, y = torch.rand(64, 1, 16, 16), torch.randint(0, 10, (64,))
    before = _flat(model)
    local_train(model, x, y, mech, lr=lr, local_steps=steps, batch_size=16, sampling="poisson",
                generator=make_generator(0, 1, 1), canaries=canaries)
    return _flat(model) - before


@pytest.mark.parametrize(("name", "params"), [
    ("gaussian", {"noise_multiplier": 1.0}), ("laplace", {"laplace_scale": 1.0}), ("clip", {}),
])  # fmt: skip
def test_one_step_update_less_the_share_is_the_update_without_canaries(name, params):  # noqa: ANN001
    """The noise does not depend on the canaries (same generator draws), so removing
    ``−η·Σ_in c_j / L`` gives the canary-free update up to float32 rounding."""
    mech = build_mechanism(name, params)
    design = _design(ON, 0, mech, 1, 1, DIM)
    with_canaries = _train(mech, torch.from_numpy(canary_sum(design)), 1)
    without = _train(mech, None, 1)
    share = canary_displacement(design, lr=0.5, steps=1, batch_size=16.0)
    assert np.abs(with_canaries - without).max() > 0.01  # they were there
    np.testing.assert_allclose(with_canaries - share, without, atol=1e-6)


def test_multi_step_residual_after_removal_is_small():
    """Three steps: the later steps see parameters displaced by the canaries (second order in
    η); the removal leaves a residual far below the canaries' own share."""
    mech = build_mechanism("gaussian", {"noise_multiplier": 1.0})
    design = _design(ON, 0, mech, 1, 1, DIM)
    share = canary_displacement(design, lr=0.5, steps=3, batch_size=16.0)
    residual = _train(mech, torch.from_numpy(canary_sum(design)), 3) - share - _train(mech, None, 3)
    assert np.linalg.norm(residual) < 0.05 * np.linalg.norm(share)


@pytest.mark.parametrize("kind", ["coordinate", "random"])
def test_mechanisms_score_with_the_library_functions(kind: str):
    rng = np.random.default_rng(0)
    g = rng.standard_normal(500)  # −Δ/η
    settings = CanaryConfig(enabled=True, count=40, kind=kind)
    gauss = build_mechanism("gaussian", {"noise_multiplier": 1.5, "clip": 2.0})
    d = _design(settings, 0, gauss, 0, 1, 500)
    np.testing.assert_allclose(gauss.canary_scores(d, g, batch_size=16.0, steps=3),
                               gaussian_scores(d, 16.0 * g, noise_std=3.0, steps=3))
    lap = build_mechanism("laplace", {"laplace_scale": 0.5})
    d = _design(settings, 0, lap, 0, 1, 500)
    assert d.norm == 1
    np.testing.assert_allclose(lap.canary_scores(d, g, batch_size=16.0, steps=1),
                               laplace_scores(d, 16.0 * g, noise_scale=0.5, steps=1))
    for mech in (build_mechanism("clip", {}), build_mechanism("gaussian", {"noise_multiplier": 0})):
        d = _design(settings, 0, mech, 0, 1, 500)
        np.testing.assert_allclose(mech.canary_scores(d, g, batch_size=16.0, steps=1),
                                   projections(d, 16.0 * g))
    vmf = build_mechanism("vmf", {"kappa": 300.0, "vmf_scale": 0.5})
    np.testing.assert_allclose(vmf.canary_scores(d, g, batch_size=16.0, steps=2),
                               vmf_scores(d, g, kappa=300.0, scale=0.5))
    assert build_mechanism("none", {}).canary_scores(d, g, batch_size=16.0, steps=1) is None


def test_canary_epsilon_is_the_round_without_subsampling():
    release = build_mechanism("gaussian", {"noise_multiplier": 2.0}).release(DIM)
    for accountant in ("rdp", "pld"):
        want = epsilon([ReleaseEvent(release, 1.0, 3)], 1e-5, accountant=accountant).epsilon
        assert canary_epsilon(release, 3, 1e-5, accountant) == want
    # one unsampled Gaussian release is exactly 1/σ-GDP: ε(δ) in closed form (Dong et al.)
    from fedpriv.canaries import gdp_epsilon

    assert canary_epsilon(release, 1, 1e-5, "pld") == pytest.approx(gdp_epsilon(0.5, 1e-5),
                                                                     rel=2e-3)
    assert math.isinf(canary_epsilon(build_mechanism("clip", {}).release(DIM), 1, 1e-5, "rdp"))


@pytest.mark.parametrize("seed", range(3))
def test_one_run_test_rejects_exactly_where_the_bound_exceeds(seed: int):
    """The verdict's p-value and the bound agree: ε_lower > ε  ⟺  p(ε) ≤ α."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, 1000).astype(bool)
    scores = rng.normal(0, 1, 1000) + 2.0 * bits
    bound = epsilon_one_run(scores[bits], scores[~bits], delta=1e-5, confidence=0.95)
    for eps in (0.5 * bound.epsilon, bound.epsilon - 1e-3, bound.epsilon + 1e-3, 2 * bound.epsilon):
        p = one_run_test(scores[bits], scores[~bits], epsilon=eps, delta=1e-5)
        assert (p <= 0.05) == (bound.epsilon > eps), (eps, p)


@pytest.mark.parametrize(("overrides", "key"), [
    (["audit.canaries.method=gdp-fit", "mechanism.name=laplace"], "audit.canaries.method"),
    (["audit.enabled=false"], "audit.canaries.enabled"),
    (["audit.canaries.method=magic"], "audit.canaries.method"),
    (["audit.canaries.count=1"], "audit.canaries.count"),
    (["audit.canaries.confidence=1.0"], "audit.canaries.confidence"),
    (["audit.canaries.kind=diagonal"], "audit.canaries.kind"),
])  # fmt: skip
def test_bad_canary_settings_name_their_key(overrides, key):  # noqa: ANN001
    with pytest.raises(InputError) as err:
        load_config("configs/canary-audit.toml", overrides)
    assert err.value.key == key


def test_the_settings_name_every_estimator():
    from fedpriv.canaries import ESTIMATORS

    assert set(CANARY_METHODS) == set(ESTIMATORS)
    gaussian_only = load_config("configs/canary-audit.toml",
                                ["audit.canaries.method=gdp-fit", "mechanism.overrides=[]"])
    assert gaussian_only.audit.canaries.method == "gdp-fit"


def test_a_design_holds_what_both_sides_need():
    design = _design(ON, 1, build_mechanism("laplace", {"clip": 3.0}), 0, 1, DIM)
    assert design == CanaryDesign(design.seed, 100, DIM, 3.0, "coordinate", 1)


@pytest.mark.parametrize("setting", ["train.optimizer='adam'", "train.momentum=0.9"])
def test_canaries_need_plain_sgd(setting):
    key = setting.split("=")[0]
    with pytest.raises(InputError) as err:
        load_config("configs/canary-audit.toml", [setting])
    assert err.value.key == key and "plain SGD" in err.value.allowed
