"""Which client-rounds the server attacks, and the round's attack budget: ``audit.clients =
"rotate"`` (the default) takes one client per attacked round in turn, from the round number and
who replied only; ``audit.round_seconds`` stops a round's attacks once spent (the first always
runs), and the clients it left unattacked are said, never scored as safe."""

from __future__ import annotations

import numpy as np
import pytest
from attacks_support import digits, mean_gradient_view

from attacks.runner import AttackJob, run_attacks
from fedpriv.audit.config import ROTATE, AuditConfig
from fedpriv.errors import InputError
from strategies.attack_schedule import AttackPlan


def _plan(num_clients: int = 5, **audit) -> AttackPlan:
    settings = {"attacks": ["iga"], "iterations": 2, "game_trials": 0, **audit}
    return AttackPlan(AuditConfig(**settings), train_size=100, num_clients=num_clients)


def test_the_defaults_attack_with_the_strongest_attack_one_client_in_turn():
    audit = AuditConfig()
    assert audit.attacks == ["strongest"] and audit.clients == ROTATE == "rotate"
    assert audit.round_seconds > 0


def test_rotation_attacks_every_client_once_in_num_clients_rounds():
    plan = _plan(num_clients=5)
    chosen = [plan.scheduled(r, range(5)) for r in range(1, 11)]
    assert chosen == [{0}, {1}, {2}, {3}, {4}, {0}, {1}, {2}, {3}, {4}]


def test_rotation_counts_attacked_rounds_only():
    plan = _plan(num_clients=4, every=3)
    chosen = {r: plan.scheduled(r, range(4)) for r in range(1, 11)}
    assert {r: c for r, c in chosen.items() if c} == {1: {0}, 4: {1}, 7: {2}, 10: {3}}


def test_rotation_takes_the_next_client_that_replied_cyclically():
    plan = _plan(num_clients=6)
    assert plan.scheduled(3, [0, 1, 4, 5]) == {4}  # starts at 2: 2 and 3 did not reply
    assert plan.scheduled(6, [0, 1, 3]) == {0}     # starts at 5: wraps round to 0
    assert plan.scheduled(6, []) == set()


def test_rotation_depends_on_the_round_and_the_replies_not_their_order():
    plan = _plan(num_clients=7)
    assert plan.scheduled(4, [6, 2, 5]) == plan.scheduled(4, [2, 5, 6]) == {5}


@pytest.mark.parametrize("clients, expected", [("all", {0, 2, 3}), (2, {0}), ([3, 4], {3})])
def test_the_other_choices_are_unchanged(clients, expected):
    assert _plan(clients=clients).scheduled(1, [0, 2, 3]) == expected


def test_no_attack_no_schedule():
    assert _plan(attacks=[]).scheduled(1, range(5)) == set()
    assert _plan(every=2).scheduled(2, range(5)) == set()


def test_a_bad_clients_value_names_the_key():
    from fedpriv.config import config_from_dict

    with pytest.raises(InputError, match="audit.clients"):
        config_from_dict({"audit": {"clients": "round-robin"}})
    with pytest.raises(InputError, match="audit.round_seconds"):
        config_from_dict({"audit": {"round_seconds": -1}})


def _jobs(count: int, iterations: int = 2) -> list[AttackJob]:
    images, labels = digits([0])
    view = mean_gradient_view(images, labels)
    return [AttackJob("iga", view, iterations=iterations, seed=k) for k in range(count)]


def test_an_exhausted_time_limit_runs_the_first_attack_only():
    results = run_attacks(_jobs(3), progress=False, seconds=1e-9)
    assert results[0] is not None and results[1:] == [None, None]


def test_no_time_limit_runs_every_attack():
    assert all(r is not None for r in run_attacks(_jobs(3), progress=False, seconds=None))


@pytest.mark.slow
def test_ray_runs_the_first_jobs_and_cancels_what_the_time_limit_leaves(monkeypatch):
    ray = pytest.importorskip("ray")
    cancelled, cancel = [], ray.cancel
    monkeypatch.setattr(ray, "cancel", lambda ref, **kw: cancelled.append(ref) or cancel(ref, **kw))
    slow_first = [*_jobs(1, iterations=600), *_jobs(3, iterations=2)]
    results = run_attacks(slow_first, executor="ray", num_cpus=2, progress=False,
                          seconds=1e-9)
    assert results[0] is not None and results[0].iterations == 600  # the first, to the end
    assert results[1:] == [None, None, None] and cancelled == []  # never sent: time was up
    ray.init(num_cpus=2, include_dashboard=False)
    try:  # in a Ray already running (Flower's), what is left when time runs out is cancelled
        results = run_attacks(_jobs(4, iterations=3000), executor="ray", progress=False,
                              seconds=0.5, first=0)
    finally:
        ray.shutdown()
    assert results.count(None) == len(cancelled) >= 1


@pytest.mark.parametrize("seconds", [0, -1.0, True, float("nan")])
def test_a_bad_time_limit_is_refused(seconds):
    with pytest.raises(InputError, match="attack.seconds"):
        run_attacks(_jobs(1), progress=False, seconds=seconds)


def test_a_spent_round_budget_skips_the_rest_in_turn_and_says_so(monkeypatch):
    images, labels = digits([0, 1])
    plan = _plan(clients="all", round_seconds=1e-9)
    for cid in (0, 1, 2):
        plan.add(1, cid, mean_gradient_view(images, labels), [0, 1])

    def truth(ids):
        return images.numpy()[: len(ids)], labels.numpy()[: len(ids)]

    plan.pending.reverse()  # replies came in another order: the turn decides who goes first
    tuned, tuner = [], plan.tuner
    plan.tuner = lambda name, view, rnd: tuned.append(view) or tuner(name, view, rnd)
    outcomes = list(plan.run(1, "inline", truth, lambda cid: 0.0))
    assert [o.client_id for o in outcomes] == [0]
    assert plan.skipped == [1, 2]
    assert np.isfinite(outcomes[0].row["ssim"])
    assert len(tuned) == 1  # nor are the skipped clients tuned for: the budget includes tuning
    for cid in (0, 1, 2):
        plan.add(2, cid, mean_gradient_view(images, labels), [0, 1])
    assert [o.client_id for o in plan.run(2, "inline", truth, lambda cid: 0.0)] == [1]
    assert plan.skipped == [0, 2]  # round 2's turn starts at client 1


def test_rotation_takes_one_client_a_round_however_many_parts_the_round_has(
        monkeypatch, tmp_path):
    """A round is checked in parts of ``CHUNK`` replies; the attacked client is chosen once
    over the whole round, not once a part."""
    from reliability_support import QUICKSTART, LocalGrid

    import strategies.stages as stages
    from clients.client_app import app
    from strategies.server_run import run_federation
    from workflows.config import load_config

    monkeypatch.setattr(stages, "CHUNK", 2)
    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=5", "train.local_steps=1",
                                   "train.batch_size=8", "audit.every=1", "audit.iterations=5",
                                   "audit.tune='off'", "audit.game_trials=0"])
    report = run_federation(LocalGrid(app, 5), cfg, tmp_path / "run")
    attacked = sorted(c["client_id"] for c in report["clients"] if c["attack"])
    assert attacked == [0, 1]  # round 1: client 0; round 2: client 1; one each
    assert report["attacks_skipped"] == [[], []]


def test_every_attack_of_the_first_client_runs_whatever_the_budget():
    images, labels = digits([0, 1])
    plan = _plan(attacks=["iga", "dlg"], clients="all", round_seconds=1e-9)
    for cid in (0, 1):
        plan.add(1, cid, mean_gradient_view(images, labels), [])
    outcomes = list(plan.run(1, "inline", lambda ids: (None, None), lambda cid: 0.0))
    assert [(o.client_id, o.row["attack"]) for o in outcomes] == [(0, "iga"), (0, "dlg")]
    assert plan.skipped == [1]


def test_the_leading_jobs_run_whatever_the_time_limit():
    results = run_attacks(_jobs(4), progress=False, seconds=1e-9, first=2)
    assert [r is not None for r in results] == [True, True, False, False]


def test_an_update_over_the_replay_bound_is_skipped_before_anything_is_allocated(monkeypatch):
    import strategies.attack_schedule as schedule

    images, labels = digits([0, 1])
    plan = _plan()
    view = mean_gradient_view(images, labels)
    monkeypatch.setattr(schedule, "MAX_REPLAYED_RECORDS", 1)  # the view replays 2 records
    plan.add(1, 0, view, [])
    assert plan.pending == [] and plan.unattackable == [0]
    assert list(plan.run(1, "inline", lambda ids: (None, None), lambda cid: 0.0)) == []
    assert plan.skipped == [0] and plan.unattackable == []


def test_a_hostile_declaration_cannot_make_the_default_attack_unbounded():
    from dataclasses import replace

    from strategies.attack_schedule import MAX_REPLAYED_RECORDS

    images, labels = digits([0])
    plan = _plan()
    huge = replace(mean_gradient_view(images, labels), batch_size=1e9, local_steps=100_000)
    plan.add(1, 3, huge, [])
    assert plan.pending == [] and plan.unattackable == [3]
    assert 32 * 20 <= MAX_REPLAYED_RECORDS  # the quickstart's declaration is attacked
