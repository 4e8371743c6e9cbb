"""``fedpriv deploy-local --supernodes N`` with a preset of another number of clients says so
(issue 41, item 3): one line, before anything starts, and in the printed summary. Nothing is
started here: the plan alone is checked, and the summary rendered from a stand-in report."""

from __future__ import annotations

from reliability_support import QUICKSTART

from workflows.cli.deploy_local import render
from workflows.deploy.local import plan_deployment


def test_fewer_supernodes_than_the_preset_names_is_said_in_one_line(tmp_path):
    plan = plan_deployment(QUICKSTART, 2, tmp_path / "two")
    assert plan.notice is not None and "\n" not in plan.notice
    assert "10 clients" in plan.notice and "running with 2" in plan.notice
    assert "--supernodes 10" in plan.notice and "epsilon" in plan.notice
    assert plan_deployment(QUICKSTART, 10, tmp_path / "ten").notice is None
    asked = plan_deployment(QUICKSTART, 2, tmp_path / "asked", ["data.num_clients=2"])
    assert asked.notice is None  # the user set it: the run is the config


def test_the_summary_repeats_the_notice(monkeypatch):
    monkeypatch.setattr("workflows.cli.simulate.render", lambda result: "run summary")
    deployment = {"supernodes": 2, "auth": False, "tls": False, "run_id": 7,
                  "wall_seconds": 1.0, "flwr_home": "/x", "notice": "the preset names 10"}
    lines = render({"deployment": deployment}).splitlines()
    assert lines[-1] == "not the preset as written: the preset names 10"
    assert render({"deployment": {**deployment, "notice": None}}).count("\n") == 1
