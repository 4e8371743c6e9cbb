"""``[sweep]`` validation: defaults, presets, and an InputError naming the key for bad values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedpriv.errors import InputError
from workflows.config import config_from_dict, load_config
from workflows.sweep.config import SweepConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"


def test_defaults_compare_gaussian_and_vmf():
    sweep = config_from_dict({}).sweep
    assert sweep == SweepConfig()
    assert sweep.mechanisms == ["gaussian", "vmf"] and sweep.attack == "iga"


@pytest.mark.parametrize("preset", sorted(p.name for p in CONFIGS.glob("*.toml")))
def test_every_preset_still_validates(preset):
    assert isinstance(load_config(CONFIGS / preset).sweep, SweepConfig)


def test_study_presets_span_the_published_range():
    full = load_config(CONFIGS / "paper-compare.toml")
    quick = load_config(CONFIGS / "paper-compare-quick.toml")
    assert min(full.sweep.epsilons) == 0.5 and max(full.sweep.epsilons) == 170
    assert full.sweep.attack_iterations == 10_000 and full.train.batch_size == 128
    assert len(quick.sweep.epsilons) >= 3
    assert quick.sweep.attack_iterations < full.sweep.attack_iterations
    assert {"gaussian", "vmf"} <= set(quick.sweep.mechanisms)


def test_the_fashion_mnist_presets_carry_the_published_protocol():
    full = load_config(CONFIGS / "paper-fmnist.toml")
    quick = load_config(CONFIGS / "paper-fmnist-quick.toml")
    for cfg in (full, quick):
        assert cfg.data.name == "fashion-mnist" and cfg.data.num_clients == 1
        assert (cfg.rounds, cfg.sweep.epochs, cfg.train.batch_size) == (1, 3, 128)
        assert (cfg.train.lr, cfg.train.weight_decay, cfg.mechanism.value("clip")) == (
            0.005, 0.1, 1.0)
        assert cfg.sweep.attack == "iga" and cfg.sweep.attack_iterations == 10_000
        assert cfg.sweep.attack_on == "first-release"
    assert full.sweep.parameters == {
        "gaussian": [1.23, 0.660, 0.461, 0.420, 0.321, 0.282, 0.229, 0.204],
        "vmf": [75.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0, 400.0]}
    assert full.sweep.baselines == ["none", "clip"]
    assert full.sweep.batch_sizes == [16, 32, 64, 128] and len(full.sweep.seeds) == 3
    assert quick.sweep.parameters == {"gaussian": [1.23], "vmf": [75.0]}
    assert quick.sweep.baselines == ["none"] and quick.sweep.seeds == [0]


def test_the_fashion_mnist_recipe_is_the_protocol_on_standardised_inputs_at_table_v():
    base = load_config(CONFIGS / "paper-fmnist.toml")
    recipe = load_config(CONFIGS / "paper-fmnist-recipe.toml")
    assert recipe.model.name == "paper-mlp-standardized" and base.model.name == "paper-mlp"
    # everything else the published protocol, as the base preset has it
    for section in ("data", "train", "mechanism", "audit", "simulation"):
        assert getattr(recipe, section) == getattr(base, section), section
    assert (recipe.rounds, recipe.sweep.epochs, recipe.sweep.batch_sizes) == (1, 3, [128])
    assert recipe.sweep.parameters == {"gaussian": [1.23, 0.660, 0.461, 0.204],
                                       "vmf": [75.0, 150.0, 250.0, 400.0]}
    assert recipe.sweep.baselines == ["none"] and recipe.sweep.seeds == [0, 1, 2]
    assert (recipe.sweep.attack, recipe.sweep.attack_iterations, recipe.sweep.attack_on) == (
        "iga", 10_000, "first-release")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("epsilons", []),
        ("epsilons", [0]),
        ("epsilons", [1, 0]),
        ("epsilons", [1, -2]),
        ("epsilons", [1, 1]),
        ("epsilons", [float("inf")]),
        ("epsilons", [float("nan")]),
        ("epsilons", "1"),
        ("mechanisms", []),
        ("mechanisms", ["none"]),
        ("mechanisms", ["gaussian", "gaussian"]),
        ("attack", ""),
        ("attack_iterations", 0),
        ("attack_iterations", 1.5),
        ("attack_clients", 0),
    ],
)
def test_bad_values_name_the_key(key, value):
    with pytest.raises(InputError) as err:
        config_from_dict({"sweep": {key: value}})
    assert err.value.key == f"sweep.{key}"


def test_unknown_sweep_key_is_rejected():
    with pytest.raises(InputError) as err:
        config_from_dict({"sweep": {"epsilon": [1.0]}})
    assert err.value.key == "sweep.epsilon"


def test_attack_clients_cannot_exceed_the_clients():
    with pytest.raises(InputError) as err:
        config_from_dict({"data": {"num_clients": 2}, "sweep": {"attack_clients": 3}})
    assert err.value.key == "sweep.attack_clients"


def test_set_override_reaches_the_sweep():
    cfg = load_config(CONFIGS / "paper-compare-quick.toml", ["sweep.epsilons=[2, 4]"])
    assert cfg.sweep.epsilons == [2, 4]


def test_loading_a_config_does_not_import_the_sweep():
    """Every config load imports the ``[sweep]`` section; the package it sits in re-exports the
    sweep lazily, so the plan, the runner, its figures and its workers stay unimported."""
    code = ("import sys\n"
            "from workflows.config import load_config\n"
            "load_config('configs/quickstart.toml')\n"
            "print(sorted(m for m in sys.modules if m.startswith('workflows.sweep.')))\n"
            "import workflows.sweep as sweep\n"
            "print(sweep.run_sweep.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.split("\n")[:2] == ["['workflows.sweep.config']", "workflows.sweep.run"]
