"""A finished run taken on to more rounds (issue 41, item 7): ``fedpriv simulate --resume RUN
--set rounds=N`` ends where a run of N rounds from the start ends; ``rounds`` is the one key
that may change, and the refusals are one line naming the key.

The runs go on the in-process grid (the real ServerApp body); the command line is driven up to
the simulation, which is replaced by a recorder (no Ray)."""

from __future__ import annotations

import shutil

import pytest
from reliability_support import QUICKSTART, LocalGrid, assert_same_outcome, faulty_client_app

from fedpriv.audit import AuditStore, verify
from fedpriv.calibration import calibrated
from fedpriv.errors import InputError
from strategies.server_run import extended, run_federation
from workflows.cli.main import main
from workflows.config import load_config

SMALL = ["data.num_clients=3", "train.local_steps=2", "train.lr=1.0", "train.batch_size=16",
         "audit.attacks=[]"]  # not about attacks: the default attacks one client a round


def _run(cfg, run_dir, resume=False):  # noqa: ANN001, ANN202
    grid = LocalGrid(faulty_client_app({}), cfg.data.num_clients)
    return run_federation(grid, cfg, run_dir, resume=resume)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2-round run, and a 3-round run from the start to compare with."""
    base = tmp_path_factory.mktemp("extend")
    _run(load_config(QUICKSTART, ["rounds=2", *SMALL]), base / "two")
    want = _run(load_config(QUICKSTART, ["rounds=3", *SMALL]), base / "three")
    return base, want


def test_a_finished_run_extended_equals_the_longer_run(finished, tmp_path):
    base, want = finished
    run_dir = tmp_path / "run"
    shutil.copytree(base / "two", run_dir)
    got = _run(load_config(QUICKSTART, ["rounds=3", *SMALL]), run_dir, resume=True)
    assert got["status"] == "completed" and got["config"]["rounds"] == 3
    assert_same_outcome(got, want, run_dir, base / "three", rounds=3)
    assert got["integrity"]["ok"] and not verify(run_dir)  # the changed config is chained
    with AuditStore.open(run_dir, readonly=True) as store:
        assert store.run_info()["config"]["rounds"] == 3


def test_extension_is_refused_below_the_completed_rounds_or_after_a_calibration():
    cfg = load_config(QUICKSTART, ["rounds=2", *SMALL])
    with pytest.raises(InputError, match="at least the 2 rounds"):
        extended(cfg, 1, 2)
    with pytest.raises(InputError) as exc:
        extended(cfg, 0, 0)
    assert exc.value.key == "rounds"
    target = load_config(None, ["rounds=2", *SMALL, "mechanism.target_epsilon=8"])
    with pytest.raises(InputError, match="calibrated to mechanism.target_epsilon"):
        extended(calibrated(target, [120, 100, 150], 13_700), 3, 2)


def test_the_command_line_takes_rounds_only(finished, monkeypatch, capsys):
    base, _ = finished
    calls = []
    monkeypatch.setattr("workflows.simulation.simulate",
                        lambda cfg, run_dir, **kw: calls.append((cfg, kw)) or {})
    monkeypatch.setattr("workflows.cli.simulate.render", lambda result: "")
    assert main(["simulate", "--resume", str(base / "two"), "--set", "rounds=5"]) == 0
    (cfg, kw), = calls
    assert cfg.rounds == 5 and kw["resume"] is True
    assert cfg == load_config(QUICKSTART, ["rounds=5", *SMALL])
    capsys.readouterr()
    for flags, named in ((["--set", "train.lr=0.5"], "--set train.lr"),
                         (["--set", "rounds=1"], "rounds"),
                         (["--out", "x"], "--out")):
        assert main(["simulate", "--resume", str(base / "two"), *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and named in err[0], err
    assert len(calls) == 1
