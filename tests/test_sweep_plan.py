"""Cell planning: the shared accounting setting and calibrated cells, re-accounted independently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.config import config_from_dict
from fedpriv.data import load_dataset, partition_indices
from fedpriv.errors import InputError
from fedpriv.mechanisms import make_release
from workflows.sweep import cell_config, cell_key, check_sweepable, plan_cell, sweep_setting
from workflows.sweep.plan import SweepSetting

RAW = {
    "rounds": 20,
    "data": {"num_clients": 3},
    "train": {"batch_size": 64, "local_steps": 2, "lr": 2.0},
    "audit": {"delta": 1e-5, "ground_truth": True},
    "sweep": {"epsilons": [10, 1], "mechanisms": ["gaussian", "vmf", "laplace"],
              "attack_iterations": 50, "attack_clients": 2},
}
SETTING = SweepSetting(sample_rate=0.18, steps=60, dim=13_700, delta=1e-5, accountant="rdp",
                       client_sizes=(718, 719), num_classes=10, input_shape=(1, 16, 16))
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
    assert setting.steps == 20 * 2
    assert setting.dim == 256 * 50 + 50 * 15 + 15 * 10  # paper MLP, no biases: 13,700
    assert setting.num_classes == 10 and setting.delta == 1e-5


def _reaccount(cell, setting):
    release = make_release(cell.mechanism, cell.parameter, setting.dim)
    events = [ReleaseEvent(release, setting.sample_rate, setting.steps)]
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
    run = cell_config(cfg, cell)
    assert run.mechanism.name == "vmf" and run.mechanism.value("kappa") == cell.parameter
    assert run.audit.attacks == ["iga"] and run.audit.iterations == 50
    assert run.audit.clients == 2 and run.audit.every == cfg.rounds  # round 1 only
    assert run.train == cfg.train and run.data == cfg.data and run.seed == cfg.seed


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
    keys = [cell_key("vmf", e) for e in (0.5, 1, 1.0000001, 170, 1e-5)]
    assert keys[:2] == ["vmf-eps0.5", "vmf-eps1"] and keys[3] == "vmf-eps170"
    assert len(set(keys)) == len(keys)
    assert np.all([k.startswith("vmf-eps") for k in keys])
