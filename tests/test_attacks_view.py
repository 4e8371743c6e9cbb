"""The server's view: no ground truth, the released gradient, pseudo-gradient labelling."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
import torch
from attacks_support import SHAPE, digits, fresh_params, mean_gradient_view

from attacks import ServerView, run_attack, simulate_view
from fedpriv.errors import InputError

PUBLIC_FIELDS = {
    "model_name",
    "input_shape",
    "num_classes",
    "global_params",
    "update",
    "learning_rate",
    "batch_size",
    "local_steps",
    "mechanism",
    "mechanism_params",
    "data_range",
    "optimizer",
}


def _view(**changes) -> ServerView:
    theta = fresh_params(0)
    rng = np.random.default_rng(1)
    fields = dict(
        model_name="paper-mlp",
        input_shape=SHAPE,
        num_classes=10,
        global_params=theta,
        update=[rng.normal(size=t.shape).astype(np.float32) for t in theta],
        learning_rate=0.5,
        batch_size=4.0,
    )
    fields.update(changes)
    return ServerView(**fields)


def test_view_holds_only_public_protocol_state():
    assert {f.name for f in dataclasses.fields(ServerView)} == PUBLIC_FIELDS
    entry = set(inspect.signature(run_attack).parameters)
    assert entry == {"name", "view", "iterations", "restarts", "seed", "num_images", "device",
                     "options"}  # device: where the optimisation runs, no data


def test_gradient_is_minus_update_over_lr_and_steps():
    for steps in (1, 3):
        view = _view(local_steps=steps)
        for g, u in zip(view.gradient(), view.update, strict=True):
            np.testing.assert_allclose(g, -u / (0.5 * steps), rtol=1e-6)
        assert view.pseudo_gradient is (steps > 1)


def test_mean_gradient_view_recovers_the_autograd_gradient():
    x, y = digits([0, 1])
    view = mean_gradient_view(x, y, lr=0.25)
    model = view.build_model()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    for g, expected in zip(view.gradient(), grads, strict=True):
        np.testing.assert_allclose(g, expected.numpy(), rtol=1e-5, atol=1e-9)


def test_view_arrays_are_read_only_copies():
    theta = fresh_params(0)
    view = _view(global_params=theta)
    theta[0][:] = 7.0
    assert not np.any(view.global_params[0] == 7.0)
    with pytest.raises(ValueError):
        view.update[0][0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.learning_rate = 1.0


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"learning_rate": 0.0}, "view.learning_rate"),
        ({"batch_size": -1.0}, "view.batch_size"),
        ({"local_steps": 0}, "view.local_steps"),
        ({"data_range": (1.0, 0.0)}, "view.data_range"),
        ({"update": [np.zeros(3)]}, "view.update"),
    ],
)
def test_bad_view_inputs_raise_input_error(change, key):
    with pytest.raises(InputError) as err:
        _view(**change)
    assert err.value.key == key


def test_results_are_labelled_pseudo_gradient_for_several_steps():
    for steps in (1, 2):
        view = _view(local_steps=steps, batch_size=1.0)
        result = run_attack("iga", view, iterations=2, restarts=1, seed=0)
        assert result.pseudo_gradient is (steps > 1)
        assert result.summary()["pseudo_gradient"] is (steps > 1)


def test_simulated_client_releases_the_mean_gradient_and_labels_several_steps():
    x, y = digits([0, 1, 2])
    theta = fresh_params(0)
    one = simulate_view("paper-mlp", x, y, learning_rate=0.2, global_params=theta)
    reference = mean_gradient_view(x, y, seed=0, lr=0.2)  # autograd, independent route
    for g, expected in zip(one.gradient(), reference.gradient(), strict=True):
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-7)
    assert one.batch_size == 3.0 and not one.pseudo_gradient
    several = simulate_view("paper-mlp", x, y, local_steps=3, global_params=theta)
    assert several.pseudo_gradient and several.local_steps == 3
    assert run_attack("idlg", several, iterations=2).pseudo_gradient
