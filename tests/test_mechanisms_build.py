"""Registry, parameter validation (InputError naming the key), params round-trip, imports."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from fedpriv.errors import InputError
from fedpriv.gradients import PerExampleGradients
from fedpriv.mechanisms import build_mechanism, mechanism_class, mechanism_names


def test_registry_names() -> None:
    assert mechanism_names() == ["none", "clip", "gaussian", "laplace", "vmf", "client-gaussian"]
    assert all(mechanism_class(name).name == name for name in mechanism_names())


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys, fedpriv.mechanisms as m\n"
        "m.build_mechanism('vmf', {'kappa': 5.0}).params()\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_defaults() -> None:
    assert build_mechanism("none", {}).params() == {}
    assert build_mechanism("clip", {}).params() == {"clip": 1.0}
    assert build_mechanism("gaussian", {}).params() == {"clip": 1.0, "noise_multiplier": 1.0}
    assert build_mechanism("laplace", {}).params() == {"clip": 1.0, "laplace_scale": 1.0}
    vmf = build_mechanism("vmf", {"clip": 3.0})
    assert vmf.params() == {"clip": 3.0, "kappa": 100.0, "vmf_scale": 3.0, "vmf_keep_norm": False}


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("gaussian", {"clip": 0.5, "noise_multiplier": 1.3, "clip_per_layer": [0.25, 0.5]}),
        ("laplace", {"clip": 2, "laplace_scale": 0.1, "clip_per_layer": "0.1, 0.2,0.3"}),
        ("vmf", {"kappa": 7, "vmf_scale": 0.2, "vmf_keep_norm": True}),
        ("vmf", {"clip_per_layer": (1.0, 2.0)}),
        ("clip", {"clip": np.float32(0.75)}),
    ],
)
def test_params_round_trip(name: str, params: dict) -> None:
    mech = build_mechanism(name, params)
    again = build_mechanism(name, mech.params())
    assert again == mech and again.params() == mech.params()
    assert all(isinstance(v, float | int | str | bool | list) for v in mech.params().values())


def test_sensitivity_and_guarantee() -> None:
    assert math.isinf(build_mechanism("none", {}).sensitivity)
    per_layer = {"clip_per_layer": [3.0, 4.0]}
    assert build_mechanism("gaussian", per_layer).sensitivity == pytest.approx(5.0)
    assert build_mechanism("vmf", per_layer).params()["vmf_scale"] == pytest.approx(5.0)
    assert build_mechanism("laplace", per_layer).sensitivity == pytest.approx(7.0)
    guarantees = {
        ("none", ()): False,
        ("clip", ()): False,
        ("gaussian", ()): True,
        ("gaussian", (("noise_multiplier", 0.0),)): False,
        ("laplace", ()): True,
        ("vmf", ()): True,
        ("vmf", (("vmf_keep_norm", True),)): False,
    }
    for (name, extra), expected in guarantees.items():
        assert build_mechanism(name, dict(extra)).release(10).formal_guarantee is expected


@pytest.mark.parametrize(
    ("name", "params", "key"),
    [
        ("gaussian", {"noise_multiplier": -0.1}, "noise_multiplier"),
        ("gaussian", {"noise_multiplier": "1.0"}, "noise_multiplier"),
        ("gaussian", {"noise_multiplier": math.nan}, "noise_multiplier"),
        ("gaussian", {"clip": 0.0}, "clip"),
        ("clip", {"clip": -1.0}, "clip"),
        ("vmf", {"clip": math.inf}, "clip"),
        ("vmf", {"kappa": 0.0}, "kappa"),
        ("vmf", {"kappa": -3.0}, "kappa"),
        ("vmf", {"kappa": True}, "kappa"),
        ("vmf", {"kappa": None}, "kappa"),
        ("vmf", {"vmf_scale": 0.0}, "vmf_scale"),
        ("vmf", {"vmf_keep_norm": "yes"}, "vmf_keep_norm"),
        ("laplace", {"laplace_scale": 0.0}, "laplace_scale"),
        ("laplace", {"laplace_scale": "abc"}, "laplace_scale"),
        ("gaussian", {"clip_per_layer": [1.0, 0.0]}, "clip_per_layer"),
        ("gaussian", {"clip_per_layer": "1,x"}, "clip_per_layer"),
        ("gaussian", {"clip_per_layer": []}, "clip_per_layer"),
        ("clip", {"clip_per_layer": 2.0}, "clip_per_layer"),
        ("gauss", {}, "name"),
    ],
)
def test_bad_parameters_raise_input_error_naming_the_key(name: str, params: dict, key: str) -> None:
    with pytest.raises(InputError) as info:
        build_mechanism(name, params, key_prefix="clients.mechanism")
    assert info.value.key == f"clients.mechanism.{key}"
    assert info.value.key in str(info.value)


def test_unused_parameters_are_ignored() -> None:
    mech = build_mechanism("gaussian", {"kappa": "not used", "noise_multiplier": 2.0})
    assert mech.params() == {"clip": 1.0, "noise_multiplier": 2.0}


def test_per_layer_bounds_must_match_model_layers() -> None:
    mech = build_mechanism("gaussian", {"clip_per_layer": [1.0, 1.0]})
    grads = torch.zeros(2, 6)
    with pytest.raises(InputError) as info:
        mech.privatize(PerExampleGradients(grads, None, (2, 2, 2)), torch.Generator(),
                       batch_size=2.0)
    assert info.value.key == "mechanism.clip_per_layer"
    with pytest.raises(InputError):
        mech.privatize(PerExampleGradients(grads), torch.Generator(), batch_size=2.0)


@pytest.mark.parametrize("batch_size", [0.0, -1.0, math.nan])
def test_bad_batch_size(batch_size: float) -> None:
    with pytest.raises(ValueError):
        build_mechanism("none", {}).privatize(PerExampleGradients(torch.ones(1, 3)), None,
                                              batch_size=batch_size)


@pytest.mark.parametrize("name", ["none", "clip", "gaussian", "laplace", "vmf"])
def test_every_mechanism_checks_its_fit_to_the_model_layers(name: str) -> None:
    mechanism = build_mechanism(name, {})
    mechanism.check_layers([12_800, 750, 150])  # flat clipping fits any model
    if name != "none":
        per_layer = build_mechanism(name, {"clip_per_layer": [1.0, 1.0]})
        with pytest.raises(InputError, match="mechanism.clip_per_layer"):
            per_layer.check_layers([12_800, 750, 150])
