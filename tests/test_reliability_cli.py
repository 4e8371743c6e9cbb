"""``fedpriv simulate`` refuses bad input before Ray starts and before it writes anything.

Each refusal must exit 2 with one line naming the flag or key, leave the file system as it
was, and never reach :func:`workflows.simulation._run_on_ray` (patched here to fail).
"""

from __future__ import annotations

import json

import pytest
from reliability_support import QUICKSTART, LocalGrid, faulty_client_app

import workflows.simulation
from strategies.server_run import run_federation
from workflows.cli.main import main
from workflows.config import load_config

CONFIG = str(QUICKSTART)


@pytest.fixture(autouse=True)
def no_ray(monkeypatch):
    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("Ray was started for a run that should have been refused")

    monkeypatch.setattr(workflows.simulation, "_run_on_ray", refuse)


def _refused(capsys, args: list[str], key: str) -> str:
    assert main(["simulate", *args]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("sets", "key"),
    [
        (["data.name=mnist", "data.root=/nonexistent/fedpriv-data"], "data.root"),
        (["mechanism.clip_per_layer=[1.0, 1.0]"], "mechanism.clip_per_layer"),
        (["data.num_clients=100000"], "data.num_clients"),
        # the VMF PLD now accounts kappa = 5000 (automatic grid); beyond 1e6 it refuses kappa
        (["mechanism.name=vmf", "mechanism.kappa=2e6", "audit.accountant=pld"], "kappa"),
        (["mechanism.noise_multiplier=nan"], "mechanism.noise_multiplier"),
        (["train.lr=inf"], "train.lr"),
        (["audit.attacks=['magic']"], "audit.attacks"),
    ],
)
def test_settings_that_would_fail_inside_ray_are_refused_first(tmp_path, capsys, sets, key):
    out = tmp_path / "run"
    _refused(capsys, [CONFIG, *[a for s in sets for a in ("--set", s)], "--out", str(out)], key)
    assert not out.exists()


def test_nonexistent_config_and_missing_config(tmp_path, capsys):
    _refused(capsys, [str(tmp_path / "nope.toml"), "--out", str(tmp_path / "run")], "CONFIG")
    _refused(capsys, ["--out", str(tmp_path / "run")], "CONFIG")
    assert list(tmp_path.iterdir()) == []


def test_out_must_be_new_or_empty(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("keep me")
    _refused(capsys, [CONFIG, "--out", str(taken)], "--out")
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
    _refused(capsys, [CONFIG, "--out", str(taken / "notes.txt")], "--out")
    assert (taken / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("extra", "key"),
    [([CONFIG], "CONFIG"), (["--set", "train.lr=0.5"], "--set train.lr"),
     (["--out", "x"], "--out")],
)
def test_resume_takes_nothing_but_the_run_dir(tmp_path, capsys, extra, key):
    _refused(capsys, ["--resume", str(tmp_path), *extra], key)


def test_resume_needs_a_store(tmp_path, capsys):
    _refused(capsys, ["--resume", str(tmp_path / "nowhere")], "--resume")
    _refused(capsys, ["--resume", str(tmp_path)], "--resume")


def test_resume_of_a_damaged_store_exits_2(tmp_path, capsys):
    run_dir = tmp_path / "run"
    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=2", "train.local_steps=1",
                                   "audit.attacks=[]"])  # the default attacks a client a round
    run_federation(LocalGrid(faulty_client_app({}), 2), cfg, run_dir)
    db = run_dir / "audit.sqlite"
    db.write_bytes(db.read_bytes()[:4096])
    capsys.readouterr()  # the setup run's progress bar
    _refused(capsys, ["--resume", str(run_dir)], "audit.sqlite")


def test_resume_of_a_finished_run_returns_its_report_without_ray(tmp_path, capsys):
    run_dir = tmp_path / "run"
    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=2", "train.local_steps=1",
                                   "audit.attacks=[]"])
    first = run_federation(LocalGrid(faulty_client_app({}), 2), cfg, run_dir)
    capsys.readouterr()
    assert main(["simulate", "--resume", str(run_dir), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["accuracy"] == first["accuracy"] and again["status"] == "completed"
