"""``mechanism.target_epsilon``: the noise calibrated before the run equals what
``fedpriv account --target-epsilon`` gives for the client with the largest rate (same q, T, δ,
sampling, accountant); bad settings exit 2 naming the key; a run's clients end at most at the
target, the calibrated one within the calibration's tolerance, and report.json records it."""

from __future__ import annotations

import math
import tomllib

import pytest
from cli_support import run_cli
from reliability_support import QUICKSTART

from fedpriv.calibration import calibrated
from fedpriv.commands.account import account
from fedpriv.config import Config
from fedpriv.errors import InputError
from workflows.config import config_from_dict, load_config

SIZES, DIM = [120, 100, 150], 13_700  # client 1 has the fewest records: the largest rate
ROUNDS, STEPS, BATCH = 3, 2, 16
BASE = [f"rounds={ROUNDS}", f"train.local_steps={STEPS}", f"train.batch_size={BATCH}",
        "data.num_clients=3"]


def _cfg(*sets: str) -> Config:
    return load_config(None, [*BASE, *sets])


@pytest.mark.parametrize(("mechanism", "sampling", "accountant", "extra"), [
    ("gaussian", "poisson", "tightest", {}),
    ("laplace", "poisson", "rdp", {}),
    ("vmf", "fixed", "rdp", {"dim": DIM}),
])
def test_calibration_is_fedpriv_account_for_the_largest_rate(mechanism, sampling, accountant,
                                                             extra) -> None:
    cfg = _cfg("mechanism.target_epsilon=2.0", f"mechanism.name={mechanism!r}",
               f"train.sampling={sampling!r}", f"audit.accountant={accountant!r}")
    resolved = calibrated(cfg, SIZES, DIM)
    record = resolved.mechanism.calibration
    n = min(SIZES)
    how = (dict(sampling="fixed-size", population=n, sample_size=BATCH) if sampling == "fixed"
           else dict(sample_rate=BATCH / n))
    want = account(mechanism, target_epsilon=2.0, steps=ROUNDS * STEPS, delta=1e-5,
                   accountant=accountant, **how, **extra)
    parameter = record.parameter
    assert want[parameter] == resolved.mechanism.params[parameter] == record.value
    assert record.epsilon == want["epsilon"] <= 2.0
    assert (record.client, record.sample_rate, record.steps) == (1, BATCH / n, ROUNDS * STEPS)
    assert record.population == (n if sampling == "fixed" else None)
    assert record.accountant == accountant and resolved.mechanism.target_epsilon is None


def test_resolved_config_round_trips_and_calibrating_it_again_changes_nothing() -> None:
    resolved = calibrated(_cfg("mechanism.target_epsilon=3.0", "audit.accountant='rdp'"),
                          SIZES, DIM)
    assert Config.from_json(resolved.to_json()) == resolved  # what every client receives
    assert calibrated(resolved, SIZES, DIM) is resolved


def test_an_override_on_other_parameters_is_calibrated_too_and_the_most_noise_wins() -> None:
    cfg = _cfg("mechanism.target_epsilon=2.0", "audit.accountant='rdp'",
               "mechanism.overrides=[{clients = [2], clip = 3.0}]")
    record = calibrated(cfg, [120, 150, 60], DIM).mechanism.calibration
    assert record.client == 2  # its own group, and the fewest records


@pytest.mark.parametrize(("sets", "key", "words"), [
    (["mechanism.target_epsilon=1", "mechanism.noise_multiplier=1"], "mechanism.target_epsilon",
     "mechanism.noise_multiplier"),
    (["mechanism.target_epsilon=1", "mechanism.overrides=[{clients = [0], noise_multiplier = "
      "2.0}]"], "mechanism.overrides[0].noise_multiplier", "mechanism.target_epsilon"),
    (["mechanism.target_epsilon=1", "mechanism.overrides=[{clients = [0], name = 'laplace'}]"],
     "mechanism.overrides[0].name", "mechanism.target_epsilon"),
    (["mechanism.overrides=[{clients = [0], target_epsilon = 1.0}]"],
     "mechanism.overrides[0].target_epsilon", "one target"),
    (["mechanism.target_epsilon=0"], "mechanism.target_epsilon", "> 0"),
    (["mechanism.target_epsilon=-2.5"], "mechanism.target_epsilon", "> 0"),
    (["mechanism.target_epsilon=1", "mechanism.name='clip'"], "mechanism.target_epsilon",
     "noise parameter"),
])
def test_bad_settings_name_the_key(sets, key, words) -> None:
    with pytest.raises(InputError) as exc:
        _cfg(*sets)
    assert exc.value.key == key and words in str(exc.value)


def test_an_edited_calibration_record_is_refused() -> None:
    raw = calibrated(_cfg("mechanism.target_epsilon=3.0", "audit.accountant='rdp'"),
                     SIZES, DIM).to_dict()
    raw["mechanism"]["noise_multiplier"] = 0.5
    with pytest.raises(InputError, match=r"mechanism\.calibration\.value"):
        config_from_dict(raw)


def test_an_unreachable_target_names_the_key() -> None:
    cfg = _cfg("mechanism.target_epsilon=1e-9", "audit.accountant='rdp'")
    with pytest.raises(InputError) as exc:
        calibrated(cfg, SIZES, DIM)
    assert exc.value.key == "mechanism.target_epsilon" and "client 1" in exc.value.allowed


def test_cli_exits_2_with_one_line_naming_both_keys(capsys, tmp_path) -> None:
    code, _, err = run_cli(capsys, "simulate", str(QUICKSTART), "--set",
                           "mechanism.target_epsilon=1", "--out", str(tmp_path / "run"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "mechanism.target_epsilon" in err and "mechanism.noise_multiplier" in err
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Quickstart (its σ left out) at target ε = 2 on three clients, in process."""
    from clients.client_app import app
    from strategies.server_run import run_federation
    from workflows.local_grid import LocalGrid

    raw = tomllib.loads(QUICKSTART.read_text(encoding="utf-8"))
    del raw["mechanism"]["noise_multiplier"]
    raw["mechanism"]["target_epsilon"] = 2.0
    raw.update(rounds=2, data={**raw["data"], "num_clients": 3})
    raw["train"] = {**raw["train"], "local_steps": 2}
    # not about attacks: the default attacks one client a round
    raw["audit"] = {**raw["audit"], "attacks": []}
    cfg = config_from_dict(raw)
    run_dir = tmp_path_factory.mktemp("target") / "run"
    return run_federation(LocalGrid(app, 3), cfg, run_dir)


def test_a_run_spends_at_most_the_target(run) -> None:
    report = run
    assert report["status"] == "completed" and report["integrity"]["ok"]
    record = report["config"]["mechanism"]["calibration"]
    assert record["target_epsilon"] == 2.0 and record["accountant"] == "tightest"
    assert report["config"]["mechanism"]["noise_multiplier"] == record["value"]
    assert "target_epsilon" not in report["config"]["mechanism"]
    eps = {c["client_id"]: c["epsilon"] for c in report["clients"]}
    assert all(e <= 2.0 for e in eps.values()), eps
    worst = eps[record["client"]]
    assert worst == max(eps.values())
    assert worst == pytest.approx(record["epsilon"], rel=1e-9)
    assert 2.0 * (1 - 1e-3) <= worst <= 2.0  # calibrate's tolerance (rtol = 1e-3)
    assert not math.isnan(worst)
