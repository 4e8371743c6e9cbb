"""The server attacks by default, as a user's `fedpriv simulate` runs it: the strongest attack
on one client per round in turn, unscored without the oracle and said so; and a round whose
attack budget is spent attacks no further client and lists the ones it left. Few iterations
(the schedule and the budget are under test, not the attack's reach); each command runs in a
session of its own, stopped when it ends (:func:`process_support.run_in_session`)."""

import json
import os
import sqlite3
import sys
from pathlib import Path

from process_support import run_in_session

from fedpriv.audit.summary import UNSCORED_NOTE

ROOT = Path(__file__).parents[1]
SMALL = ["rounds=2", "data.num_clients=3", "train.local_steps=2", "audit.every=1",
         "audit.iterations=20"]


def _simulate(tmp_path: Path, *sets: str) -> tuple[str, dict, list[tuple]]:
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "fedpriv", "simulate", "configs/quickstart.toml", "--out",
            str(out)]
    for value in (*SMALL, *sets):
        argv += ["--set", value]
    env = {**os.environ, "FLWR_HOME": str(tmp_path / "flwr")}
    proc = run_in_session(argv, cwd=ROOT, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with sqlite3.connect(out / "audit.sqlite") as conn:
        rows = conn.execute("SELECT round, client_id, attack, ssim FROM attacks "
                            "ORDER BY round, client_id").fetchall()
    return proc.stdout, json.loads((out / "report.json").read_text()), rows


def test_the_default_attacks_one_client_a_round_in_turn_unscored(tmp_path):
    stdout, report, rows = _simulate(tmp_path)
    assert rows == [(1, 0, "strongest", None), (2, 1, "strongest", None)]
    attacked = {c["client_id"]: c["attack"] for c in report["clients"]}
    assert attacked[2] is None and attacked[0]["ssim"] is None and attacked[1]["ssim"] is None
    assert attacked[0]["settings"]["tuning"]["mode"] == "public"  # tuned on public data
    assert report["attacks_skipped"] == [[], []]
    lines = stdout.splitlines()
    cells = {int(line.split()[0]): line.split()[-1] for line in lines
             if line.split() and line.split()[0] in {"0", "1", "2"}}
    assert cells == {0: "unscored", 1: "unscored", 2: "-"}
    assert UNSCORED_NOTE in lines


def test_a_spent_round_budget_attacks_one_client_and_lists_the_rest(tmp_path):
    _, report, rows = _simulate(tmp_path, "rounds=1", "audit.clients='all'",
                                "audit.round_seconds=0.001")
    assert [row[:2] for row in rows] == [(1, 0)]  # round 1's turn starts at client 0
    assert report["attacks_skipped"] == [[1, 2]]
