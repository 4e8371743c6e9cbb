"""``[[adversary]]`` behaviours: their config is validated, and the noise laws they fake are the
laws they claim (variance matched, bounded support), by independent computation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import clients.client_app  # noqa: F401 - registers [[adversary]]
from clients.adversaries import BEHAVIOURS
from clients.adversaries.noise import StandIn, honest_noise, per_coordinate_std
from clients.config import ADVERSARY_BEHAVIOURS
from fedpriv.errors import InputError
from fedpriv.gradients.source import PerExampleGradients
from fedpriv.mechanisms import build_mechanism
from workflows.config import load_config

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.toml"


def _load(table: str, *more: str):  # noqa: ANN202
    return load_config(QUICKSTART, [f"adversary=[{table}]", *more])


def test_every_configured_behaviour_has_hooks_and_back():
    assert set(BEHAVIOURS) == set(ADVERSARY_BEHAVIOURS)
    assert all(h.before or h.release or h.after for h in BEHAVIOURS.values())


@pytest.mark.parametrize("table, key", [
    ("{clients = [1], behaviour = 'teleport'}", "adversary[0].behaviour"),
    ("{clients = [1], behaviour = 'under-noise', factor = 1.5}", "adversary[0].factor"),
    ("{clients = [1], behaviour = 'declare-huge-steps', factor = 2.5}", "adversary[0].factor"),
    ("{clients = [1], behaviour = 'declare-huge-steps', factor = 200000}", "adversary[0].factor"),
    ("{clients = [1], behaviour = 'inflate-size', factor = 0.5}", "adversary[0].factor"),
    ("{clients = [1], behaviour = 'signal-scale', factor = 1}", "adversary[0].factor"),
    ("{clients = [1], behaviour = 'rename-arrays', factor = 2}", "adversary[0].factor"),
    ("{clients = [1], behaviour = 'declare-fewer-steps', factor = -3}", "adversary[0].factor"),
    ("{clients = [1], behaviour = 'steal-identity'}", "adversary[0].target"),
    ("{clients = [1], behaviour = 'steal-identity', target = 1}", "adversary[0].target"),
    ("{clients = [1], behaviour = 'steal-identity', target = 10}", "adversary[0].target"),
    ("{clients = [1], behaviour = 'replay', target = 2}", "adversary[0].target"),
    ("{clients = [1], behaviour = 'vmf-kappa'}", "adversary[0].behaviour"),
])
def test_a_bad_table_is_refused_naming_its_key(table: str, key: str) -> None:
    with pytest.raises(InputError) as err:
        _load(table)
    assert err.value.key == key


def test_a_noise_behaviour_needs_an_additive_mechanism():
    with pytest.raises(InputError) as err:
        _load("{clients = [2], behaviour = 'reuse-noise'}", "mechanism.name=vmf",
              "mechanism.kappa=100")
    assert err.value.key == "adversary[0].behaviour" and "gaussian" in err.value.allowed


@pytest.mark.parametrize("table", [
    "{clients = [1], behaviour = 'declare-tiny-sigma'}",
    "{clients = [1], behaviour = 'declare-tiny-sigma', factor = 1e-5}",
    "{clients = [1], behaviour = 'inflate-size', factor = 1000}",
    "{clients = [1], behaviour = 'steal-identity', target = 3}",
    "{clients = [1], behaviour = 'declare-huge-steps'}",
    "{clients = [1], behaviour = 'uniform-noise'}",
])
def test_good_tables_load(table: str) -> None:
    assert _load(table).adversary[0].clients == [1]


def _source(batch: int = 4, dim: int = 200_000) -> PerExampleGradients:
    grads = torch.zeros(batch, dim, dtype=torch.float64)
    return PerExampleGradients(grads, layer_sizes=(dim,))


@pytest.mark.parametrize("name, params", [
    ("gaussian", {"noise_multiplier": 1.5, "clip": 2.0}),
    ("laplace", {"laplace_scale": 0.7, "clip": 1.0}),
])
@pytest.mark.parametrize("law", ["rademacher-noise", "uniform-noise"])
def test_bounded_noise_has_the_declared_variance_and_a_bounded_law(name, params, law):  # noqa: ANN001
    mechanism = build_mechanism(name, params)
    stand_in = BEHAVIOURS[law].release(None, mechanism)  # these laws read nothing of the turn
    noise = stand_in.privatize(_source(), torch.Generator().manual_seed(1), batch_size=1.0)
    noise = noise.numpy()
    s = per_coordinate_std(mechanism)
    scale = params.get("noise_multiplier", params.get("laplace_scale"))
    expected_std = scale * params["clip"] * (1 if name == "gaussian" else math.sqrt(2))
    assert s == pytest.approx(expected_std)
    # sample variance of 2e5 draws: relative sd sqrt(2/n)*... < 1%; 5 % tolerance
    assert np.var(noise) == pytest.approx(s**2, rel=0.05)
    bound = s if law == "rademacher-noise" else math.sqrt(3) * s
    assert np.max(np.abs(noise)) <= bound * (1 + 1e-12)
    honest = honest_noise(mechanism)(torch.zeros(200_000, dtype=torch.float64),
                                     torch.Generator().manual_seed(1), 0).numpy()
    assert np.max(np.abs(honest)) > 2 * bound  # unbounded: |z| > 3.5 sd ~100 times in 2e5


def test_the_stand_in_scales_the_clipped_signal_and_can_skip_clipping():
    mechanism = build_mechanism("gaussian", {"noise_multiplier": 1.0, "clip": 1.0})
    grads = torch.zeros(2, 3, dtype=torch.float64)
    grads[0, 0], grads[1, 1] = 5.0, 0.5
    source = PerExampleGradients(grads, layer_sizes=(3,))
    zero = lambda total, generator, step: torch.zeros_like(total)  # noqa: E731
    gen = torch.Generator().manual_seed(0)
    clipped = StandIn(mechanism, zero, signal=10.0).privatize(source, gen, batch_size=2.0)
    assert clipped.tolist() == pytest.approx([5.0, 2.5, 0.0])  # (10·(1, .5, 0)) / 2
    raw = StandIn(mechanism, zero, clip=False).privatize(source, gen, batch_size=2.0)
    assert raw.tolist() == pytest.approx([2.5, 0.25, 0.0])
