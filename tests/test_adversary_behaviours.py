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


@pytest.mark.parametrize("law, bound", [("rademacher-noise", 1.0), ("uniform-noise", math.sqrt(3))])
def test_the_client_app_releases_the_stand_ins_noise(tmp_path: Path, law: str, bound: float):
    """Through fedpriv's ClientApp and the server: client 0's released noise (σC = 1, signal
    ‖S‖ ≤ B·C ≈ 0.03) is the bounded law, client 1's the Gaussian."""
    r = _releases(tmp_path, f"{{clients = [0], behaviour = '{law}'}}", 1)
    released = {cid: v for (_, cid), v in r.items()}
    assert np.max(np.abs(released[0])) <= bound + 0.05
    assert np.std(released[0]) == pytest.approx(1.0, rel=0.05)
    assert np.max(np.abs(released[1])) > 3.0  # Gaussian: |z| > 3 in 13,700 draws


def _releases(tmp_path: Path, table: str, rounds: int) -> dict[tuple[int, int], np.ndarray]:
    """``(round, client) → −Δ·L`` (the released ``S + z``) of a tiny-signal run (σC = 1)."""
    from reliability_support import LocalGrid

    from clients.client_app import app
    from fedpriv.audit import AuditStore
    from strategies.server_run import run_federation

    cfg = _load(table, f"rounds={rounds}", "data.num_clients=2", "train.local_steps=1",
                "train.lr=1.0", "mechanism.clip=0.001", "mechanism.noise_multiplier=1000.0",
                "audit.attacks=[]")  # not about attacks: the default attacks one client a round
    run_federation(LocalGrid(app, 2), cfg, tmp_path / "run")
    out = {}
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        for u in store.iter_updates():
            delta = np.concatenate([a.ravel() for a in store.load_update(u.update_id).values()])
            out[u.round, u.client_id] = -delta.astype(np.float64) * u.report.divisor
    return out


@pytest.mark.parametrize("law, combine, most", [
    ("reuse-noise", np.subtract, 0.1),    # r2 − r1 = S2 − S1: the noise is gone
    ("cancel-noise", np.add, 0.1),        # r2 + r1 = S2 + S1
    ("perturbed-replay", np.subtract, 0.011 * math.sqrt(13_700)),  # 1 % of ‖r1‖ ≈ 117
])
def test_shared_noise_cancels_between_rounds(tmp_path: Path, law: str, combine, most: float):  # noqa: ANN001
    r = _releases(tmp_path, f"{{clients = [0], behaviour = '{law}'}}", 2)
    assert np.linalg.norm(combine(r[2, 0], r[1, 0])) <= most
    assert np.linalg.norm(combine(r[2, 1], r[1, 1])) > 100  # honest: ≈ √(2·13,700) = 166
    if law == "perturbed-replay":
        assert np.linalg.norm(r[2, 0] - r[1, 0]) >= 0.009 * np.linalg.norm(r[1, 0])
