"""The sweep's axes — explicit noise parameters, baselines, batch sizes with epochs, seeds, and
the first-release probe — with a stubbed runner; intervals checked against scipy."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.errors import InputError
from fedpriv.mechanisms import make_release
from workflows.config import Config, config_from_dict
from workflows.sweep import STUDY, run_sweep
from workflows.sweep.figures import BATCH_FIGURE, FIGURES
from workflows.sweep.results import student_t_interval

RAW = {
    "rounds": 2,
    "data": {"num_clients": 1},
    "train": {"batch_size": 64, "optimizer": "adamw", "lr": 0.005, "weight_decay": 0.1},
    "mechanism": {"clip": 1.0},
    "audit": {"ground_truth": True},  # the simulation-only oracle: a sweep scores attacks
    "sweep": {"epsilons": [], "mechanisms": ["gaussian", "vmf"], "noise_multipliers": [1.0, 0.5],
              "kappas": [300.0], "baselines": ["none", "clip"], "batch_sizes": [32, 128],
              "seeds": [4, 5, 6], "epochs": 3, "attack_on": "first-release",
              "attack_iterations": 7},
}  # fmt: skip


class StubRunner:
    """Reports that depend on seed and noise; records every configuration it ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[Config, Path]] = []

    def __call__(self, cfg: Config, run_dir: Path) -> dict[str, Any]:
        self.calls.append((cfg, run_dir))
        run_dir.mkdir(parents=True)
        mech = cfg.mechanism.name
        noise = {"none": 0.0, "clip": 0.0, "gaussian": cfg.mechanism.value("noise_multiplier"),
                 "vmf": 1.0}[mech]
        probe = cfg.rounds == 1
        attack = {"attack_id": 1, "round": 1, "mse": 0.05 + 0.1 * noise + 0.01 * cfg.seed,
                  "ssim": 0.5 - 0.1 * noise, "psnr": 12.0 - cfg.seed, "best_ssim": 0.6,
                  "label_accuracy": 1.0} if probe else None
        return {"accuracy": [0.1, 0.8 - 0.1 * noise + 0.02 * cfg.seed],
                "clients": [{"client_id": 0, "epsilon": 1.0, "attack": attack}],
                "wall_seconds": 1.0}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    cfg = config_from_dict(RAW)
    runner = StubRunner()
    out = tmp_path_factory.mktemp("axes")
    return cfg, runner, out, run_sweep(cfg, out, runner=runner)


def test_every_cell_runs_with_every_seed_as_training_and_probe(swept):
    cfg, runner, _, result = swept
    cells = 2 * (2 + 1 + 2)  # batch sizes × (σ's + κ's + baselines)
    assert len(result["rows"]) == cells and len(result["runs"]) == 3 * cells
    assert len(runner.calls) == 2 * 3 * cells  # a training run and a probe each
    trains = [c for c, _ in runner.calls if c.rounds == 2]
    probes = [c for c, _ in runner.calls if c.rounds == 1]
    assert {c.seed for c in trains} == {4, 5, 6}
    for c in trains:
        assert c.audit.attacks == [] and c.train.optimizer == "adamw"
        n = 1437  # the digits training set, one client
        assert c.train.local_steps == math.ceil(3 * n / (2 * c.train.batch_size))
    for c in probes:
        assert (c.train.local_steps, c.train.lr, c.train.optimizer) == (1, 1.0, "sgd")
        assert c.train.weight_decay == 0 and c.audit.attacks == ["iga"]
        assert c.audit.iterations == 7
    pairs = {(c.seed, c.mechanism.name, c.train.batch_size, c.mechanism.params.get("kappa"),
              c.mechanism.params.get("noise_multiplier")) for c in trains}
    assert pairs == {(c.seed, c.mechanism.name, c.train.batch_size,
                      c.mechanism.params.get("kappa"), c.mechanism.params.get("noise_multiplier"))
                     for c in probes}  # every probe repeats its own run's first step


def test_cell_rows_are_seed_means_with_student_t_intervals(swept):
    _, _, _, result = swept
    by_cell: dict[str, list[dict]] = {}
    for run in result["runs"]:
        by_cell.setdefault(run["cell"], []).append(run)
    for row in result["rows"]:
        runs = by_cell[row["cell"]]
        assert sorted(r["seed"] for r in runs) == [4, 5, 6] and row["seeds"] == 3
        for key in ("accuracy", "mse", "psnr", "ssim"):
            values = np.array([r[key] for r in runs])
            assert row[key] == pytest.approx(values.mean(), rel=1e-12)
            if values.std() > 0:
                low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(),
                                             scale=stats.sem(values))
                assert row[f"{key}_ci"] == pytest.approx((high - low) / 2, rel=1e-9)
            else:
                assert row[f"{key}_ci"] == pytest.approx(0.0, abs=1e-15)


def test_interval_edge_cases():
    assert student_t_interval([0.5]) == (0.5, None)
    assert student_t_interval([]) == (None, None)
    assert student_t_interval([1.0, math.nan, 3.0])[0] == 2.0  # NaN (a failed score) skipped


def test_explicit_parameters_carry_their_per_step_and_per_epoch_epsilon(swept):
    _, _, _, result = swept
    settings = {s["batch_size"]: s for s in result["settings"]}
    for row in result["rows"]:
        setting = settings[row["batch_size"]]
        if row["parameter_name"] is None:
            assert row["mechanism"] in ("none", "clip")
            assert math.isinf(row["epsilon"]) and math.isinf(row["log_capacity"])
            continue
        release = make_release(row["mechanism"], row[row["parameter_name"]], row["dim"])
        q = row["batch_size"] / 1437
        per_step = epsilon([ReleaseEvent(release, q, setting["steps"])], 1e-5,
                           accountant=setting["accountant"]).epsilon
        epochs = round(setting["steps"] * q)
        per_epoch = epsilon([ReleaseEvent(release, q, epochs)], 1e-5,
                            accountant=setting["accountant"]).epsilon
        assert row["epsilon"] == row["achieved_epsilon"] == pytest.approx(per_step, rel=1e-12)
        assert row["epsilon_per_epoch"] == pytest.approx(per_epoch, rel=1e-12)
        assert row["epsilon_per_epoch"] < row["epsilon"]  # the compatibility unit understates
        assert row["target_epsilon"] is None
        assert row["log_capacity_cumulative"] == pytest.approx(row["log_capacity"]
                                                               * setting["steps"])


def test_cell_keys_name_the_parameter_the_batch_and_the_seed(swept):
    _, _, out, result = swept
    keys = {r["cell"] for r in result["rows"]}
    assert {"gaussian-noise_multiplier0.5-L32", "vmf-kappa300-L128", "none-L32",
            "clip-L128"} <= keys
    assert (out / "cells" / "vmf-kappa300-L32-seed5.json").is_file()
    assert (out / "runs" / "vmf-kappa300-L32-seed5" / "probe").is_dir()


def test_batch_figure_and_a_study_with_intervals_and_labelled_units(swept):
    _, _, out, result = swept
    assert [Path(f).name for f in result["figures"]] == [*FIGURES, BATCH_FIGURE]
    text = (out / STUDY).read_text(encoding="utf-8")
    assert "ε (per epoch, compat.)" in text and "understates ε" in text
    assert "95% Student-t interval over seeds" in text and " ± " in text
    assert "first noisy release of training" in text
    assert "no formal guarantee" in text


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"kappas": [300.0], "mechanisms": ["gaussian"]}, "sweep.kappas"),
        ({"noise_multipliers": [0.0]}, "sweep.noise_multipliers"),
        ({"noise_multipliers": [1.0, 1.0]}, "sweep.noise_multipliers"),
        ({"baselines": ["gaussian"]}, "sweep.baselines"),
        ({"batch_sizes": [0]}, "sweep.batch_sizes"),
        ({"seeds": [1, 1]}, "sweep.seeds"),
        ({"epochs": 0}, "sweep.epochs"),
        ({"attack_on": "round-2"}, "sweep.attack_on"),
        ({"parameters": {"gaussian": [1.0]}}, "sweep.parameters"),
        ({"kappas": None}, "sweep.epsilons"),  # VMF left with neither targets nor κ's
    ],
)
def test_bad_axis_values_name_the_key(patch, key):
    sweep = {**RAW["sweep"], **patch}
    sweep = {k: v for k, v in sweep.items() if v is not None}
    with pytest.raises(InputError) as err:
        config_from_dict({**RAW, "sweep": sweep})
    assert err.value.key == key


def test_epochs_that_need_too_many_local_steps_are_refused(tmp_path):
    cfg = config_from_dict({**RAW, "sweep": {**RAW["sweep"], "epochs": 5000, "batch_sizes": [1]}})
    with pytest.raises(InputError) as err:
        run_sweep(cfg, tmp_path, runner=StubRunner())
    assert err.value.key == "sweep.epochs"


def test_explicit_grids_are_compared_at_the_nearest_epsilon():
    from workflows.sweep.study import _nearest_lines

    def row(mech, name, value, eps, acc, mse):
        return {"mechanism": mech, "batch_size": 128, "target_epsilon": None,
                "parameter_name": name, name: value, "achieved_epsilon": eps,
                "accuracy": acc, "accuracy_ci": 0.01, "mse": mse, "mse_ci": None,
                "ssim": 0.1, "ssim_ci": None}

    rows = [row("gaussian", "noise_multiplier", 1.23, 0.5, 0.68, 0.21),
            row("gaussian", "noise_multiplier", 0.46, 3.0, 0.74, 0.20),
            row("vmf", "kappa", 75, 1.7, 0.23, 0.29),  # nearest: σ = 0.46 (ε 3.0), within 2×
            row("vmf", "kappa", 400, 30000.0, 0.6, 0.25)]  # no Gaussian within 2×
    lines = _nearest_lines(rows, "vmf")
    assert len(lines) == 2
    assert "kappa = 75 (ε 1.7) vs Gaussian noise_multiplier = 0.46 (ε 3)" in lines[0]
    assert "accuracy 0.23 ± 0.01 vs 0.74 ± 0.01" in lines[0]
    assert "VMF has the higher MSE in 1 and the lower accuracy in 1" in lines[1]
