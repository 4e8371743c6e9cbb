"""The identification game on a client's release: honest and under-noising clients (§13)."""

from __future__ import annotations

import pytest
from attacks_support import digits

from attacks.estimators.game import SCALE_BETA, GameSettings, identification_game
from attacks.simulate import simulate_view
from fedpriv.mechanisms import build_mechanism

BATCH, POOL = digits(list(range(8))), digits(list(range(100, 115)))  # M = 16 candidates
SETTINGS = GameSettings(trials=400, confidence=0.95, seed=3)


def _game(name: str, used: dict, declared: dict, **view_kwargs):
    view = simulate_view("paper-mlp", *BATCH, mechanism=name, mechanism_params=used, seed=1,
                         **view_kwargs)
    batch = tuple(t.numpy() for t in BATCH)
    pool = tuple(t.numpy() for t in POOL)
    return identification_game(view, build_mechanism(name, declared), batch, pool, SETTINGS)


def _leakage(*args, **kwargs):
    return _game(*args, **kwargs).leakage


def test_honest_gaussian_client_stays_below_its_bound():
    params = {"noise_multiplier": 2.0, "clip": 1.0}
    played = _game("gaussian", params, params)
    game = played.leakage
    assert game.candidates == 16 and game.trials == 400
    assert played.law == "gaussian" and played.scale == played.declared_scale == 2.0
    assert game.log_lower <= game.log_bound
    assert game.p_value > 0.025


def test_under_noising_client_is_caught():
    """Declares σ = 2, adds σ/10: the trials draw at the scale its noise supports (≈ 0.2, at
    most 1.04 × at p ≈ 13,700 and β = 1e-9), and the lower end lies above the declared bound
    with a p-value far below any Holm threshold of a run."""
    played = _game("gaussian", {"noise_multiplier": 0.2, "clip": 1.0},
                   {"noise_multiplier": 2.0, "clip": 1.0})
    assert 0.2 <= played.scale < 0.22
    game = played.leakage
    assert game.log_lower > game.log_bound
    assert SCALE_BETA <= game.p_value < 1e-6


def test_noiseless_release_is_identified_at_log_m():
    played = _game("clip", {"clip": 1.0}, {"clip": 1.0})
    game = played.leakage
    assert played.law == "none" and played.scale == 0.0
    assert game.successes == game.trials
    assert game.log_value == pytest.approx(game.log_bound)  # no capacity bound: log M
    assert game.p_value == 1.0


@pytest.mark.parametrize(("name", "params", "kwargs"), [
    ("gaussian", {"noise_multiplier": 1.0}, {"local_steps": 2}),
    ("vmf", {"kappa": 10.0}, {}),
])
def test_game_does_not_apply(name, params, kwargs):
    assert _game(name, params, params, **kwargs) is None


def test_run_reports_empirical_leakage_and_marks_an_under_noising_client(tmp_path):
    """In a run: every attacked client reports ``empirical_leakage``; the honest one stays
    below its bound, the one that adds a tenth of its declared noise is flagged by Holm over the
    run's games at ``audit.game_alpha``."""
    from reliability_support import QUICKSTART, LocalGrid

    from clients.client_app import app
    from strategies.server_run import run_federation
    from workflows.config import load_config

    cfg = load_config(QUICKSTART, [
        "rounds=1", "data.num_clients=2", "train.local_steps=1", "train.batch_size=8",
        "mechanism.noise_multiplier=2.0", "audit.ground_truth=true", "audit.attacks=['idlg']",
        "audit.iterations=5", "audit.game_trials=300", "audit.clients='all'",
        "adversary=[{clients = [1], behaviour = 'under-noise', factor = 0.1}]",
    ])  # fmt: skip
    report = run_federation(LocalGrid(app, 2), cfg, tmp_path / "run")
    clients = {c["client_id"]: c for c in report["clients"]}
    keys = {"log_value", "log_lower", "log_upper", "log_bound", "candidates", "trials",
            "confidence"}
    honest, cheat = clients[0]["empirical_leakage"], clients[1]["empirical_leakage"]
    assert keys <= honest.keys() and keys <= cheat.keys()
    assert honest["trials"] == 300 and honest["candidates"] == cfg.audit.game_candidates
    assert honest["log_lower"] <= honest["log_bound"] and not honest["exceeds_bound"]
    assert cheat["exceeds_bound"]
    family = report["identification_game"]
    assert family["adjustment"] == "holm" and family["alpha"] == cfg.audit.game_alpha
    assert family["client_rounds"] == family["tested"] == 2
    assert [(f["client_id"], f["round"]) for f in family["flagged"]] == [(1, 1)]
    assert report["config"]["audit"]["game_alpha"] == 0.05
    lo, hi = clients[0]["mbp_interval"]
    assert lo <= clients[0]["mbp_estimate"] <= hi


def test_report_flags_by_holm_over_the_runs_games():
    """Three games at p-values 0.01, 0.02, 0.5: Holm at α = 0.05 flags the first two
    (3·0.01 = 0.03 ≤ α, then 2·0.02 = 0.04 ≤ α, then 0.5 > α), at α = 0.02 none. A game
    stored without a p-value is counted, not tested."""
    import json

    from fedpriv.audit.report_game import client_game, game_family

    def row(rnd, p):
        leakage = {"log_value": 0.1, "log_lower": 0.0, "log_upper": 0.2, "log_bound": 1.0,
                   "p_value": p}
        return {"attack": "game", "round": rnd, "mbp_estimate": 0.1, "estimate_json":
                json.dumps({"empirical_leakage": leakage, "mbp_interval": [0, 1],
                            "abp_interval": [0, 1]})}

    attacks = {0: [row(1, 0.01), row(2, 0.5)], 1: [row(1, 0.02), row(2, None)]}
    record, flagged = game_family(attacks, {"audit": {"game_alpha": 0.05}})
    assert flagged == {(0, 1), (1, 1)}
    assert record["client_rounds"] == 4 and record["tested"] == 3 and record["alpha"] == 0.05
    assert [f["adjusted_p_value"] for f in record["flagged"]] == pytest.approx([0.03, 0.04])
    assert client_game(0, attacks[0], flagged)["empirical_leakage"]["exceeds_bound"]
    assert not client_game(0, attacks[0][1:], flagged)["empirical_leakage"]["exceeds_bound"]
    assert game_family(attacks, {"audit": {"game_alpha": 0.02}})[1] == set()
