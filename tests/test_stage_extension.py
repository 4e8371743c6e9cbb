"""A new verification test is one module plus one entry in the stage list
(strategies/stages/__init__.py, issue 37): tests/toy_stage.py, inserted before the ledger
fold, takes part in every declared reply's verdict, and its property reaches the label
(fedpriv/verification/properties.py reads it from the verdict, no table edited)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import toy_stage
from reliability_support import QUICKSTART, LocalGrid

from clients.client_app import app
from fedpriv.audit.reader import DB_NAME
from strategies import stages
from strategies.server_run import run_federation
from workflows.config import load_config

NO_ATTACKS = "audit.attacks=[]"  # not about attacks: the default attacks one client a round


def _verdicts(run_dir: Path) -> dict[int, dict]:
    with sqlite3.connect(run_dir / DB_NAME) as db:
        rows = db.execute("SELECT client_id, verification_json FROM tallies WHERE "
                          "verification_json IS NOT NULL").fetchall()
    return {cid: json.loads(text) for cid, text in rows}


@pytest.mark.parametrize("limit", [1e6, 0.0])
def test_a_toy_stage_joins_every_verdict(tmp_path: Path, monkeypatch, limit: float) -> None:
    listed = list(stages.STAGES)
    at = listed.index(stages.ledger.fold)  # one entry: before the verdict is labelled
    monkeypatch.setattr(stages, "STAGES", [*listed[:at], toy_stage.step_size, *listed[at:]])
    monkeypatch.setattr(toy_stage, "LIMIT", limit)
    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=2", NO_ATTACKS])
    report = run_federation(LocalGrid(app, 2), cfg, tmp_path / "run")
    verdicts = _verdicts(tmp_path / "run")
    assert sorted(verdicts) == [0, 1]
    for summary in verdicts.values():
        toy = [p for p in summary["parts"] if p["test"] == "toy-step-size"]
        assert len(toy) == 1
        settings = summary["properties"]["settings"]
        if limit > 0:
            assert toy[0]["status"] == "consistent"
            assert settings["status"] == "passed"  # the server's own settings check passes it
        else:
            assert toy[0]["status"] == summary["status"] == "inconsistent"
            assert settings["status"] == "failed" and "max |Δ_i|" in settings["reason"]
            assert summary["label"] == "declared"
    failures = {f["client_id"] for f in report["failures"] if f["kind"] == "inconsistent"}
    assert failures == (set() if limit > 0 else {0, 1})


def test_a_round_in_parts_records_what_the_whole_round_does(tmp_path: Path, monkeypatch) -> None:
    """The stages after conform take a round in parts of ``CHUNK`` replies (memory): the
    verdicts and tallies are those of the round taken whole."""
    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=3", "train.local_steps=1",
                                   NO_ATTACKS])
    whole = run_federation(LocalGrid(app, 3), cfg, tmp_path / "whole")
    monkeypatch.setattr(stages, "CHUNK", 2)
    parts = run_federation(LocalGrid(app, 3), cfg, tmp_path / "parts")
    assert _verdicts(tmp_path / "parts") == _verdicts(tmp_path / "whole")
    assert parts["accuracy"] == whole["accuracy"]
    keys = ("epsilon", "log_bayes_capacity", "mbp_bound", "verification")
    assert [{k: c[k] for k in keys} for c in parts["clients"]] == \
        [{k: c[k] for k in keys} for c in whole["clients"]]


def test_a_finished_part_holds_no_arrays(tmp_path: Path, monkeypatch) -> None:
    """Once a part is done, its replies let go of every array (Δ, its flat copy, the update
    without canaries, the recovered update): 10,000 replies would otherwise hold ~1 GB each."""
    seen: list = []
    run_round = stages.run_round

    def keep(batch, rnd, *, audit):  # noqa: ANN001, ANN202
        run_round(batch, rnd, audit=audit)
        seen.extend(batch)

    monkeypatch.setattr(stages, "run_round", keep)
    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=3", "train.local_steps=1",
                                   NO_ATTACKS])
    run_federation(LocalGrid(app, 3), cfg, tmp_path / "run")
    assert len(seen) == 3
    assert all(r.delta == [] and r.flat is None and r.clean is None and r.recovered is None
               for r in seen)
