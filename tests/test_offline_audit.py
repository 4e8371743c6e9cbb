"""``fedpriv audit``: re-attacking stored updates offline reproduces the live auditor.

A small unprotected run (batch of one, one local step, iDLG after every round) is driven on
an in-process Grid; the offline audit rebuilds each server view from the store alone and,
with the live settings and seeds, must score exactly what the live auditor scored.
"""

from __future__ import annotations

import sqlite3

import pytest
from reliability_support import QUICKSTART, LocalGrid, faulty_client_app

from fedpriv.audit import AuditStore
from strategies.server_run import run_federation
from workflows.cli.main import main
from workflows.config import load_config
from workflows.offline_audit import audit_run

SETTINGS = ["rounds=2", "data.num_clients=2", "mechanism.name=none", "train.batch_size=1",
            "train.sampling=fixed", "train.local_steps=1", "train.lr=0.1",
            "audit.attacks=['idlg']", "audit.iterations=20", "audit.ground_truth=true",
            "audit.clients='all'", "audit.every=1"]  # fmt: skip
SCORES = ("mse", "psnr", "ssim", "best_ssim", "label_accuracy", "iterations", "restarts")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    cfg = load_config(QUICKSTART, SETTINGS)
    path = tmp_path_factory.mktemp("offline") / "run"
    run_federation(LocalGrid(faulty_client_app({}), 2), cfg, path)
    return path


def _live(run_dir, rnd: int, client: int) -> dict:  # noqa: ANN001
    with AuditStore.open(run_dir, readonly=True) as store:
        [row] = store.query(
            "SELECT * FROM attacks WHERE round = ? AND client_id = ? AND attack != 'game' "
            "ORDER BY attack_id LIMIT 1",
            (rnd, client),
        )
    return row


def _game(run_dir, rnd: int, client: int) -> dict:  # noqa: ANN001
    import json

    with AuditStore.open(run_dir, readonly=True) as store:
        rows = store.query("SELECT estimate_json FROM attacks WHERE round = ? AND client_id = ? "
                           "AND attack = 'game' ORDER BY attack_id LIMIT 1", (rnd, client))
    return json.loads(rows[0]["estimate_json"])["empirical_leakage"]


def test_offline_attack_reproduces_the_live_one(run_dir):
    result = audit_run(run_dir, attacks=["idlg"], rounds=(2, 2), clients=[1], progress=False)
    [attack] = result["attacks"]
    assert (attack["round"], attack["client_id"], attack["scored"]) == (2, 1, True)
    live = _live(run_dir, 2, 1)
    assert {k: attack[k] for k in SCORES} == {k: live[k] for k in SCORES}
    with AuditStore.open(run_dir, readonly=True) as store:
        stored = store.query("SELECT count(*) AS n FROM attacks WHERE round = 2 AND client_id = 1 "
                             "AND attack != 'game'")
        assert stored[0]["n"] == 2  # the live row and the offline one
        assert store.load_reconstruction(attack["attack_id"])["images"].shape == (1, 1, 16, 16)
    [game] = result["games"]  # the identification game (§13), live and offline alike
    leakage = game["estimate"]["empirical_leakage"]
    assert leakage["log_lower"] <= leakage["log_bound"]
    assert {k: leakage[k] for k in ("trials", "confidence")} == {
        k: _game(run_dir, 2, 1)[k] for k in ("trials", "confidence")}


def test_cli_attacks_the_selection_and_rebuilds_the_report(run_dir, capsys):
    args = ["audit", str(run_dir), "--attack", "idlg", "--rounds", "1:", "--clients", "0",
            "--iterations", "5", "--json"]  # fmt: skip
    assert main(args) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert [(a["round"], a["client_id"], a["iterations"]) for a in out["attacks"]] == [
        (1, 0, 5), (2, 0, 5)
    ]
    assert out["files"]["report"].endswith("report.json")
    assert {c["client_id"] for c in out["clients"]} == {0, 1}


@pytest.mark.parametrize(
    ("flags", "key"),
    [
        (["--rounds", "3:1"], "--rounds"),
        (["--rounds", "0"], "--rounds"),
        (["--rounds", "one"], "--rounds"),
        (["--rounds", "7:9"], "--rounds"),
        (["--clients", "a,b"], "--clients"),
        (["--clients", "5"], "--clients"),
        (["--attack", "magic"], "--attack"),
        (["--iterations", "0"], "--iterations"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(run_dir, capsys, flags, key):
    assert main(["audit", str(run_dir), *flags]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _remove_global(path) -> None:  # noqa: ANN001
    with sqlite3.connect(path / "audit.sqlite") as con:
        [relative] = con.execute(
            "SELECT path FROM tensors WHERE kind = 'global' AND round = 1"
        ).fetchone()
    (path / relative).unlink()


def _truncate(path) -> None:  # noqa: ANN001
    db = path / "audit.sqlite"
    db.write_bytes(db.read_bytes()[:3000])


@pytest.mark.parametrize("damage", [_remove_global, _truncate])
def test_damaged_store_exits_2_with_one_line(run_dir, tmp_path, capsys, damage):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    damage(copy)
    assert main(["audit", str(copy), "--rounds", "1", "--iterations", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "audit.sqlite" in err or "tensors/" in err


def test_missing_run_dir_exits_2(tmp_path, capsys):
    assert main(["audit", str(tmp_path / "nowhere")]) == 2
    assert "no such run directory" in capsys.readouterr().err
