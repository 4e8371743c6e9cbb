"""The attack entry point: registry, validation before work, threads, defaults."""

from __future__ import annotations

import pytest
import torch
from attacks_support import digits, mean_gradient_view

from attacks import AttackResult, attack_names, run_attack
from fedpriv.errors import InputError


@pytest.fixture(scope="module")
def view():
    x, y = digits([0, 1, 2])
    return mean_gradient_view(x, y)


def test_registry_names():
    assert attack_names() == ["analytic", "dlg", "idlg", "iga"]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"name": "gan"}, "attack.name"),
        ({"iterations": 0}, "attack.iterations"),
        ({"restarts": 1.5}, "attack.restarts"),
        ({"seed": -1}, "attack.seed"),
        ({"num_images": 0}, "attack.num_images"),
        ({"tv_weight": -0.1}, "attack.tv_weight"),
        ({"lr": float("nan")}, "attack.lr"),
        ({"name": "dlg", "tv_weight": 0.1}, "attack.tv_weight"),  # not a DLG option
        ({"name": "dlg", "line_search": "armijo"}, "attack.line_search"),
        ({"name": "idlg", "history_size": 0}, "attack.history_size"),
        ({"init": "zeros"}, "attack.init"),
        ({"name": "analytic", "tv_weight": 0.1}, "attack.tv_weight"),  # no options
        ({"name": "strongest", "init": "zeros"}, "attack.init"),  # a member's option, checked
        ({"name": "strongest", "colour": 1}, "attack.colour"),
    ],
)
def test_bad_settings_raise_input_error_naming_the_key(view, kwargs, key):
    args = {"name": "iga", "iterations": 1, **kwargs}
    with pytest.raises(InputError) as err:
        run_attack(args.pop("name"), view, **args)
    assert err.value.key == key


@pytest.mark.parametrize("name", [*attack_names(), "strongest"])
def test_every_attack_returns_a_complete_result(view, name):
    before, rng = torch.get_num_threads(), torch.get_rng_state()
    result = run_attack(name, view, iterations=2, restarts=2, seed=1)
    assert torch.get_num_threads() == before
    assert torch.equal(torch.get_rng_state(), rng)  # only the attack's own generator is used
    assert isinstance(result, AttackResult)
    assert result.reconstructions.shape == (3, 1, 16, 16) == result.start.shape
    assert result.labels.shape == (3,) and result.labels.dtype.kind == "i"
    assert (result.attack, result.iterations, result.restarts, result.seed) == (name, 2, 2, 1)
    assert result.seconds > 0 and not result.pseudo_gradient
    assert result.summary()["num_images"] == 3


def test_num_images_overrides_the_expected_batch_size(view):
    result = run_attack("iga", view, iterations=1, num_images=5)
    assert result.reconstructions.shape[0] == 5 == len(result.labels)


def test_public_api_is_sorted_and_resolves():
    import importlib
    import pkgutil

    import attacks

    # isort-style (ruff RUF022): CONSTANTS, then the rest, each alphabetical
    assert attacks.__all__ == sorted(attacks.__all__, key=lambda n: (not n.isupper(), n))
    assert all(hasattr(attacks, name) for name in attacks.__all__)
    for info in pkgutil.walk_packages(attacks.__path__, "attacks."):
        module = importlib.import_module(info.name)
        assert all(hasattr(module, name) for name in module.__all__), info.name
