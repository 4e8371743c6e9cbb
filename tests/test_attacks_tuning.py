"""Issue 39 item 1: attack settings tuned on a shadow client of the server's public data,
never on the attacked client's records, and recorded with every attack."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from attacks_support import digits

from attacks import simulate_view
from attacks.estimators.prior import PublicPrior
from attacks.tuning import TV_GRID, shadow_view, tune
from fedpriv.audit.config import AuditConfig
from strategies import attack_tuner
from strategies.attack_schedule import AttackPlan

PUBLIC_IDS = list(range(1000, 1200))
CLIENT_IDS = list(range(8))


@pytest.fixture(scope="module")
def public() -> PublicPrior:
    x, y = digits(PUBLIC_IDS)
    return PublicPrior(x.numpy(), y.numpy())


@pytest.fixture(scope="module")
def view():
    x, y = digits(CLIENT_IDS)
    return simulate_view("paper-mlp", x, y, local_steps=2, mechanism="clip",
                         mechanism_params={"clip": 1.0})


def test_the_shadow_has_the_declared_settings_and_public_records(view, public):
    shadow, images, labels = shadow_view(view, public, seed=3)
    same = ("model_name", "batch_size", "local_steps", "learning_rate", "mechanism",
            "mechanism_params", "optimizer")
    assert all(getattr(shadow, f) == getattr(view, f) for f in same)
    for a, b in zip(shadow.global_params, view.global_params, strict=True):
        np.testing.assert_array_equal(a, b)
    pool = {img.tobytes() for img in public.images}
    assert len(images) == 8 and all(img.tobytes() in pool for img in images)


def test_tuning_keeps_the_best_grid_value_on_the_shadow(view, public):
    found = tune("iga", view, public, iterations=5, seed=0)
    assert found.grid == TV_GRID and len(found.shadow_ssim) == len(TV_GRID)
    assert found.options == {"tv_weight": TV_GRID[int(np.argmax(found.shadow_ssim))]}
    assert found.record()["public"] == public.source


def test_the_shadow_attacks_run_at_most_the_shadow_budget(view, public, monkeypatch):
    """The grid runs at min(iterations, shadow_iterations), and the record says which."""
    import attacks.tuning as tuning

    budgets: list[int] = []
    real = tuning.run_attack
    monkeypatch.setattr(tuning, "run_attack",
                        lambda *a, **k: budgets.append(k["iterations"]) or real(*a, **k))
    assert tune("iga", view, public, iterations=6, seed=0,
                shadow_iterations=3).record()["iterations"] == 3
    assert budgets == [3] * len(TV_GRID)
    assert tune("iga", view, public, iterations=2, seed=0,
                shadow_iterations=3).record()["iterations"] == 2
    assert budgets[len(TV_GRID):] == [2] * len(TV_GRID)
    assert tuning.SHADOW_ITERATIONS < AuditConfig().iterations  # the default budget is cut


def _plan_rows(view, public, truth_images, tune_mode="public", spy=None):
    audit = AuditConfig(attacks=["iga"], iterations=5, game_trials=0, tune=tune_mode)
    plan = AttackPlan(audit, train_size=1797, public=public)
    plan.add(1, 0, view, CLIENT_IDS)
    x, y = digits(CLIENT_IDS)

    def truth(ids):
        if spy is not None:
            spy.append(("truth", list(ids)))
        return truth_images, y.numpy()

    return [o.row for o in plan.run(1, "inline", truth, lambda _c: float("inf"))]


def test_tuning_never_reads_the_attacked_clients_records(view, public, monkeypatch):
    """The chosen settings must not depend on the attacked client's records: the same with
    the true batch as with noise in its place, and chosen before the truth is first read."""
    events: list[tuple[str, object]] = []
    real_tune = attack_tuner.tune

    def spying_tune(*args, **kwargs):
        events.append(("tune", None))
        return real_tune(*args, **kwargs)

    monkeypatch.setattr(attack_tuner, "tune", spying_tune)
    x, _ = digits(CLIENT_IDS)
    rows = _plan_rows(view, public, x.numpy(), spy=events)
    kinds = [kind for kind, _ in events]
    assert kinds.count("tune") == 1 and kinds.index("tune") < kinds.index("truth")
    noise = np.random.default_rng(0).random(x.shape).astype(np.float32)
    other = _plan_rows(view, public, noise)
    assert rows[0]["settings"]["tuning"] == other[0]["settings"]["tuning"]
    chosen = rows[0]["settings"]["tuning"]["chosen"]
    assert rows[0]["settings"]["options"]["tv_weight"] == chosen["tv_weight"]


def test_tune_off_keeps_the_fixed_weight_and_says_so(view, public):
    x, _ = digits(CLIENT_IDS)
    rows = _plan_rows(view, public, x.numpy(), tune_mode="off")
    assert rows[0]["settings"]["tuning"] == {"mode": "off", "chosen": None}
    assert rows[0]["settings"]["options"]["tv_weight"] == AuditConfig().tv_weight == 1e-4


def test_one_shadow_per_round_and_declaration(view, public, monkeypatch):
    calls = []
    monkeypatch.setattr(attack_tuner, "tune",
                        lambda *a, **k: calls.append(1) or tune(*a, **k))
    audit = AuditConfig(attacks=["iga"], iterations=2, game_trials=0)
    tuner = attack_tuner.Tuner(audit, public)
    first = tuner("iga", view, 1)
    assert tuner("iga", dataclasses.replace(view), 1) == first and len(calls) == 1
    tuner("iga", view, 2)
    assert len(calls) == 2
    assert tuner("dlg", view, 1) is None  # nothing to tune


def test_tune_scope_run_tunes_once_per_declaration_in_the_run(view, public, monkeypatch):
    calls = []
    monkeypatch.setattr(attack_tuner, "tune",
                        lambda *a, **k: calls.append(k) or tune(*a, **k))
    audit = AuditConfig(attacks=["iga"], iterations=2, game_trials=0, tune_scope="run")
    assert AuditConfig().tune_scope == "round"  # θ moves the choice (benchmarks/attack_speed.py)
    tuner = attack_tuner.Tuner(audit, public)
    first = tuner("iga", view, 1)
    assert tuner("iga", view, 2) == first and tuner("iga", view, 7) == first
    assert len(calls) == 1 and first["round"] == 1 and first["scope"] == "run"
    assert calls[0]["early_stop"] == audit.early_stop
    tuner("iga", dataclasses.replace(view, local_steps=3), 2)  # another declaration
    assert len(calls) == 2
