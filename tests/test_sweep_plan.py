"""Cell planning: the shared accounting setting and calibrated cells, re-accounted independently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.data import load_dataset, partition_indices
from fedpriv.errors import InputError
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import build_mechanism, make_release
from fedpriv.mechanisms.vmf import VMFLayersRelease
from workflows.config import config_from_dict
from workflows.sweep import (
    account_cell,
    baseline_cell,
    cell_config,
    check_sweepable,
    plan_cell,
    probe_config,
    run_key,
    sweep_setting,
)
from workflows.sweep.plan import SweepSetting

RAW = {
    "rounds": 20,
    "data": {"num_clients": 3},
    "train": {"batch_size": 64, "local_steps": 2, "lr": 2.0},
    "audit": {"delta": 1e-5, "ground_truth": True},
    "sweep": {"epsilons": [10, 1], "mechanisms": ["gaussian", "vmf", "laplace"],
              "attack_iterations": 50, "attack_clients": 2},
}
SETTING = SweepSetting(batch_size=128, local_steps=30, sample_rate=0.18, steps=60, dim=13_700,
                       delta=1e-5, accountant="rdp", client_sizes=(718, 719), num_classes=10,
                       input_shape=(1, 16, 16))
SAFER = {"gaussian": 0.99, "laplace": 0.99, "vmf": 1.01}  # 1% less noise than calibrated


@pytest.fixture(scope="module")
def cfg():
    return config_from_dict(RAW)


def test_setting_uses_the_largest_client_rate_and_every_release(cfg):
    setting = sweep_setting(cfg)
    data = load_dataset("digits", "data", False, 0, 0.2)
    sizes = [len(p) for p in partition_indices(data.train_y.numpy(), 3, "iid", 0.5, 0)]
    assert setting.client_sizes == tuple(sizes)
    assert setting.sample_rate == pytest.approx(64 / min(sizes))
    assert setting.steps == 20 * 2 and setting.local_steps == 2 and setting.batch_size == 64
    assert setting.dim == 256 * 50 + 50 * 15 + 15 * 10  # paper MLP, no biases: 13,700
    assert setting.num_classes == 10 and setting.delta == 1e-5
    assert setting.epochs == pytest.approx(40 * 64 / min(sizes))


def test_epochs_set_the_local_steps_of_each_batch_size(cfg):
    raw = {**RAW, "sweep": {**RAW["sweep"], "epochs": 3}}
    with_epochs = config_from_dict(raw)
    largest = max(sweep_setting(cfg).client_sizes)
    for batch in (16, 64, 500):
        setting = sweep_setting(with_epochs, batch)
        assert setting.local_steps == -(-3 * largest // (20 * batch))  # ⌈3n/(R·L)⌉
        assert setting.steps == 20 * setting.local_steps
        assert setting.epochs >= 3 * largest / max(setting.client_sizes) - 1e-12


def test_the_rate_is_the_largest_over_every_seeds_partition():
    raw = {**RAW, "data": {"num_clients": 3, "partition": "dirichlet", "dirichlet_alpha": 0.3},
           "sweep": {**RAW["sweep"], "seeds": [0, 1, 2]}}
    setting = sweep_setting(config_from_dict(raw))
    data = load_dataset("digits", "data", False, 0, 0.2)
    smallest = min(len(p) for s in (0, 1, 2) for p in
                   partition_indices(data.train_y.numpy(), 3, "dirichlet", 0.3, s))
    assert setting.sample_rate == pytest.approx(min(64, smallest) / smallest)


def _reaccount(cell, setting, steps=None):
    release = make_release(cell.mechanism, cell.parameter, setting.dim)
    events = [ReleaseEvent(release, setting.sample_rate, steps or setting.steps)]
    return epsilon(events, setting.delta, accountant=setting.accountant).epsilon


@pytest.mark.parametrize("mechanism", ["gaussian", "vmf", "laplace"])
@pytest.mark.parametrize("target", [0.5, 10.0, 170.0])
def test_calibrated_cell_meets_the_target_tightly(mechanism, target):
    cell = plan_cell(SETTING, mechanism, target)
    achieved = _reaccount(cell, SETTING)
    assert achieved == pytest.approx(cell.epsilon, rel=1e-12)
    assert achieved <= target
    assert achieved >= target * (1 - 2e-3)  # not over-noised
    looser = cell.__class__(**{**cell.as_dict(), "parameter": cell.parameter * SAFER[mechanism]})
    assert _reaccount(looser, SETTING) > target  # 1% less noise overshoots: calibration is tight
    per_epoch = _reaccount(cell, SETTING, steps=round(60 * 0.18))  # T·q = 10.8 epochs → 11
    assert cell.epsilon_per_epoch == pytest.approx(per_epoch, rel=1e-12)


@pytest.mark.parametrize(("mechanism", "value"), [("gaussian", 1.23), ("vmf", 150.0)])
def test_an_explicit_parameter_is_accounted_not_calibrated(mechanism, value):
    cell = account_cell(SETTING, mechanism, value)
    assert cell.target_epsilon is None and cell.parameter == value
    assert cell.epsilon == pytest.approx(_reaccount(cell, SETTING), rel=1e-12)
    assert cell.epsilon_per_epoch < cell.epsilon


PER_LAYER = {"clip": 1.0, "vmf_layers": "per-layer", "vmf_layer_dims": [12_800, 750, 150]}


def test_per_layer_vmf_cells_are_accounted_as_the_run_releases_them():
    """With ``vmf_layers = "per-layer"`` a cell's ε, calibration and capacity are those of
    the release the run's clients make and its ledger tallies (one VMF per layer, RDPs
    summed: tests/test_mechanisms_vmf_layers.py), not the one-block VMF's."""
    run_release = build_mechanism("vmf", {**PER_LAYER, "kappa": 75.0}).release(SETTING.dim)
    assert isinstance(run_release, VMFLayersRelease)
    tallied = PrivacyLedger(SETTING.delta).fold(
        1, 0, run_release, steps=SETTING.steps, sample_rate=SETTING.sample_rate,
        batch_size=128, dim=SETTING.dim)["epsilon"]
    cell = account_cell(SETTING, "vmf", 75.0, PER_LAYER)
    assert cell.epsilon == pytest.approx(tallied, rel=1e-12)
    whole = account_cell(SETTING, "vmf", 75.0)
    assert cell.epsilon > 10 * whole.epsilon  # the 150-parameter layer at κ = 75 dominates
    calibrated = plan_cell(SETTING, "vmf", 10.0, PER_LAYER)
    release = calibrated.release(SETTING.dim, PER_LAYER)
    assert release == VMFLayersRelease((calibrated.parameter,) * 3, (12_800, 750, 150))
    events = [ReleaseEvent(release, SETTING.sample_rate, SETTING.steps)]
    achieved = epsilon(events, SETTING.delta).epsilon
    assert 10.0 * (1 - 2e-3) <= achieved <= 10.0
    assert calibrated.parameter < plan_cell(SETTING, "vmf", 10.0).parameter


def test_a_sweep_refuses_per_layer_kappas_that_would_override_its_cells():
    raw = {**RAW, "model": {"name": "paper-mlp"},
           "mechanism": {**PER_LAYER, "vmf_kappas": [75.0, 75.0, 75.0]}}
    with pytest.raises(InputError) as err:
        check_sweepable(config_from_dict(raw))
    assert err.value.key == "mechanism.vmf_kappas"


def test_a_baseline_has_no_guarantee():
    cell = baseline_cell(SETTING, "clip")
    assert math.isinf(cell.epsilon) and cell.parameter is None and cell.key == "clip-L128"


def test_noise_decreases_with_epsilon_and_kappa_is_sane():
    sigmas = [plan_cell(SETTING, "gaussian", e).parameter for e in (0.5, 5, 170)]
    kappas = [plan_cell(SETTING, "vmf", e).parameter for e in (0.5, 5, 170)]
    assert sigmas[0] > sigmas[1] > sigmas[2] > 0
    assert kappas[0] < kappas[1] < kappas[2] < SETTING.dim
    assert kappas[0] > 1.0  # Biswas et al. Thm 1 (monotone in κ) holds for κ ≥ 1


def test_unreachable_target_names_the_sweep_key():
    with pytest.raises(InputError) as err:
        plan_cell(SETTING, "gaussian", 1e-9)
    assert err.value.key == "sweep.epsilons"


def test_cell_config_sets_the_mechanism_and_attacks_round_one(cfg):
    cell = plan_cell(SETTING, "vmf", 10.0)
    run = cell_config(cfg, SETTING, cell, 7)
    assert run.mechanism.name == "vmf" and run.mechanism.value("kappa") == cell.parameter
    assert run.audit.attacks == ["iga"] and run.audit.iterations == 50
    assert run.audit.clients == 2 and run.audit.every == cfg.rounds  # round 1 only
    assert run.train.batch_size == 128 and run.train.local_steps == 30
    assert run.data == cfg.data and run.seed == 7


def test_the_probe_is_one_plain_sgd_step_of_the_same_run(cfg):
    raw = {**RAW, "train": {**RAW["train"], "optimizer": "sgd", "momentum": 0.9},
           "sweep": {**RAW["sweep"], "attack_on": "first-release"}}
    first = config_from_dict(raw)
    run = cell_config(first, SETTING, plan_cell(SETTING, "gaussian", 10.0), 3)
    assert run.audit.attacks == []  # the training run is not attacked: its probe is
    probe = probe_config(run)
    assert (probe.rounds, probe.train.local_steps, probe.train.lr) == (1, 1, 1.0)
    assert (probe.train.optimizer, probe.train.momentum, probe.train.weight_decay) == (
        "sgd", 0.0, 0.0)
    assert probe.audit.attacks == ["iga"] and probe.audit.every == 1
    same = ("seed", "data", "mechanism", "model", "strategy")
    assert all(getattr(probe, k) == getattr(run, k) for k in same)
    assert probe.train.batch_size == run.train.batch_size


def test_gaussian_equivalent_sigma():
    g, v = plan_cell(SETTING, "gaussian", 5.0), plan_cell(SETTING, "vmf", 5.0)
    assert g.release(100).gaussian_equivalent(100) == g.parameter
    assert v.release(13_700).gaussian_equivalent(13_700) == pytest.approx(
        math.sqrt(13_700) / (2 * v.parameter))
    assert plan_cell(SETTING, "laplace", 5.0).release(10).gaussian_equivalent(10) is None


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"mechanism": {"overrides": [{"clients": [0], "name": "none"}]}}, "mechanism.overrides"),
        ({"audit": {"enabled": False}}, "audit.enabled"),
        ({"sweep": {"attack": "breaching"}}, "sweep.attack"),
        ({"audit": {"ground_truth": False}}, "audit.ground_truth"),
    ],
)
def test_unsweepable_settings_are_refused(patch, key):
    with pytest.raises(InputError) as err:
        check_sweepable(config_from_dict({**RAW, **patch}))
    assert err.value.key == key


def test_cell_keys_are_distinct_and_readable():
    cell = plan_cell(SETTING, "vmf", 10.0)
    keys = [cell.__class__(**{**cell.as_dict(), "target_epsilon": e}).key
            for e in (0.5, 1, 1.0000001, 170, 1e-5)]
    assert keys[:2] == ["vmf-eps0.5-L128", "vmf-eps1-L128"] and keys[3] == "vmf-eps170-L128"
    assert len(set(keys)) == len(keys)
    assert np.all([k.startswith("vmf-eps") for k in keys])
    assert account_cell(SETTING, "gaussian", 1.23).key == "gaussian-noise_multiplier1.23-L128"
    assert run_key(cell, 2) == "vmf-eps10-L128-seed2"
