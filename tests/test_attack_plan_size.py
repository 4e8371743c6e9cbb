"""The attack plan scores a reconstruction only when the matching's cost matrix is bounded:
beyond :data:`fedpriv.audit.pairing.MAX_MATCH_PAIRS` pairs it is kept unscored, before the truth is
loaded (a round of 1,407 steps is scored against every record it used)."""

from __future__ import annotations

import numpy as np
from attacks_support import digits, mean_gradient_view

import strategies.attack_schedule as schedule
from fedpriv.audit.config import AuditConfig
from strategies.attack_schedule import AttackPlan


def _plan_outcomes(monkeypatch, limit: int) -> tuple[list, list]:
    monkeypatch.setattr(schedule, "MAX_MATCH_PAIRS", limit)
    images, labels = digits([0, 1])
    plan = AttackPlan(AuditConfig(attacks=["iga"], iterations=2, game_trials=0), train_size=100)
    plan.add(1, 0, mean_gradient_view(images, labels), list(range(40)))
    loaded = []

    def truth(ids):
        loaded.append(list(ids))
        return np.repeat(images.numpy(), 20, axis=0)[: len(ids)], np.zeros(len(ids), int)

    return list(plan.run(1, "inline", truth, lambda cid: 0.0)), loaded


def test_an_unbounded_matching_is_kept_unscored_without_loading_the_truth(monkeypatch):
    outcomes, loaded = _plan_outcomes(monkeypatch, 2 * 40 - 1)  # 2 images × 40 records
    (outcome,) = outcomes
    assert loaded == [] and "mse" not in outcome.row and "ssim" not in outcome.row
    assert outcome.reconstruction.shape == (2, 1, 16, 16)


def test_a_bounded_matching_is_scored(monkeypatch):
    outcomes, loaded = _plan_outcomes(monkeypatch, 2 * 40)
    (outcome,) = outcomes
    assert loaded == [list(range(40))] and outcome.row["mse"] is not None
