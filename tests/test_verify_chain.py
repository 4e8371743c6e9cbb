"""``fedpriv verify``, ``--resume`` and ``fedpriv audit`` against an edited record (issue 40).

A small run made on the in-process grid is copied and edited the way someone with write access
to the run directory would: each edit is found by ``fedpriv verify`` (exit 1, naming the
record) and refused by ``--resume`` and ``fedpriv audit`` (exit 2) before anything is written.
An untouched run verifies, also after a resume and after ``fedpriv audit`` added attacks. A
record edited and re-chained passes the chain check but not the head kept outside the run,
nor its signature.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from reliability_support import QUICKSTART, LocalGrid, faulty_client_app
from store_support import rechain

from fedpriv.errors import InputError
from strategies.server_run import run_federation
from workflows.cli import main
from workflows.cli.simulate import render
from workflows.config import load_config

# audit.attacks = []: the run attacks nothing itself (the default attacks one client a round)
SMALL = ["rounds=2", "data.num_clients=3", "train.local_steps=1", "train.lr=1.0",
         "train.batch_size=16", "audit.attacks=[]"]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs of the same config (``a`` signed) and the signing key."""
    cfg = load_config(QUICKSTART, SMALL)
    base = tmp_path_factory.mktemp("chain")
    key = Ed25519PrivateKey.generate()
    reports = {}
    for name, sign in (("a", key), ("b", None)):
        grid = LocalGrid(faulty_client_app({}), cfg.data.num_clients)
        reports[name] = run_federation(grid, cfg, base / name, sign_key=sign)
    public = base / "key.pub"
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return cfg, base, reports, public


def _copy(runs, tmp_path: Path) -> Path:  # noqa: ANN001
    run_dir = tmp_path / "run"
    shutil.copytree(runs[1] / "a", run_dir)
    return run_dir


def _sql(run_dir: Path, *statements: str) -> None:
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    conn.execute("PRAGMA foreign_keys = ON")
    with conn:
        for sql in statements:
            conn.execute(sql)
    conn.close()


def _verify(run_dir: Path, capsys, *flags: str) -> tuple[int, dict]:  # noqa: ANN001
    capsys.readouterr()
    code = main(["verify", str(run_dir), "--json", *flags])
    return code, json.loads(capsys.readouterr().out)


def _digest(run_dir: Path) -> str:
    return hashlib.sha256((run_dir / "audit.sqlite").read_bytes()).hexdigest()


def _swap_updates(run_dir: Path) -> None:
    """Swap the ids (the order) of round 2's first two updates."""
    with sqlite3.connect(run_dir / "audit.sqlite") as conn:
        a, b = (r[0] for r in conn.execute("SELECT update_id FROM updates WHERE round = 2 "
                                           "ORDER BY client_id LIMIT 2"))
        for old, new in ((a, -1), (b, a), (-1, b)):
            conn.execute("UPDATE updates SET update_id = ? WHERE update_id = ?", (new, old))


def _replace_file(run_dir: Path, other: Path) -> None:
    """Put the other run's update of client 1 in round 1 where this run's of client 0 is (the
    runs share their seed: the other run's update of client 0 is this one's, bit for bit)."""
    sql = ("SELECT t.path FROM updates u JOIN tensors t USING (tensor_id) WHERE u.round = 1 AND "
           "u.client_id = ?")
    paths = []
    for directory, client in ((run_dir, 0), (other, 1)):
        with sqlite3.connect(directory / "audit.sqlite") as conn:
            paths.append(directory / conn.execute(sql, (client,)).fetchone()[0])
    shutil.copyfile(paths[1], paths[0])


EDITS = {
    "status": (["UPDATE updates SET status = 'inconsistent' WHERE round = 1 AND client_id = 0"],
               "round 1, client 0: differs from its last chained version"),
    "epsilon": (["UPDATE tallies SET epsilon = epsilon / 2 WHERE round = 2 AND client_id = 1"],
                "tallies row {'round': 2, 'client_id': 1}, round 2, client 1: differs"),
    "memory": (["DELETE FROM memory WHERE round = 1 AND client_id = 2"],
               "memory row {'round': 1, 'client_id': 2, 'kind': 'sketch'}, round 1, client 2: "
               "missing"),
    "last round": (["DELETE FROM rounds WHERE round = 2"],  # its rows go with it (cascade)
                   "round 2: missing"),  # its first row in write order: θ's tensors row
    "rows swapped": ([], "updates row"),
    "chain entries swapped": (["UPDATE chain SET seq = -seq WHERE seq IN (10, 11)",
                               "UPDATE chain SET seq = 11 WHERE seq = -10",
                               "UPDATE chain SET seq = 10 WHERE seq = -11"],
                              "chain entry 10: does not follow"),
    "tensor file": ([], "tensors/r000001/update-c0-"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_is_found_by_verify_and_refused_by_resume_and_audit(runs, tmp_path, capsys,
                                                                      edit):
    cfg, base = runs[0], runs[1]
    run_dir = _copy(runs, tmp_path)
    statements, named = EDITS[edit]
    _sql(run_dir, *statements)
    if edit == "tensor file":
        _replace_file(run_dir, base / "b")
    if edit == "rows swapped":
        _swap_updates(run_dir)
    code, result = _verify(run_dir, capsys)
    assert code == 1 and not result["intact"] and named in result["first"], result["first"]
    before = _digest(run_dir)
    with pytest.raises(InputError, match="broken audit record") as caught:
        run_federation(None, cfg, run_dir, resume=True)
    assert named in str(caught.value) and "\n" not in str(caught.value)
    assert main(["audit", str(run_dir), "--attack", "idlg", "--iterations", "1", "--rounds",
                 "1", "--clients", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken audit record" in err[0] and named in err[0]
    assert _digest(run_dir) == before  # nothing was written


def test_resume_on_the_command_line_refuses_a_broken_record(runs, tmp_path, capsys):
    run_dir = _copy(runs, tmp_path)
    _sql(run_dir, *EDITS["status"][0])
    capsys.readouterr()
    assert main(["simulate", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken audit record" in err[0] and "client 0" in err[0]


def test_an_untouched_run_verifies_also_after_resume_and_offline_attacks(runs, tmp_path, capsys):
    cfg, reports = runs[0], runs[2]
    run_dir = _copy(runs, tmp_path)
    printed = reports["a"]["chain"]
    assert printed["rounds"].keys() == {"1", "2"} and printed["entries"] > 0
    lines = render(reports["a"]).splitlines()  # what `fedpriv simulate` prints at the end
    assert f"chain head: {printed['head']} ({printed['entries']} entries, rounds 1–2)" in lines
    assert not any(line.startswith("chain head after") for line in lines)  # one head printed
    assert any(line.startswith("signed: entry ") for line in lines)
    assert printed["head"] in (runs[1] / "a" / "report.html").read_text(encoding="utf-8")
    code, result = _verify(run_dir, capsys)
    assert code == 0 and result["head"] == printed["head"] and result["first"] is None
    report = run_federation(None, cfg, run_dir, resume=True)
    assert report["integrity"]["ok"] and report["chain"]["entries"] > printed["entries"]
    assert main(["audit", str(run_dir), "--attack", "idlg", "--iterations", "1", "--rounds",
                 "2", "--clients", "0"]) == 0
    code, result = _verify(run_dir, capsys, "--head", printed["rounds"]["1"])
    assert code == 0 and result["anchor"]["entries_after"] > 0
    code, result = _verify(run_dir, capsys, "--public-key", str(runs[1] / "key.pub"))
    assert code == 0 and result["anchor"]["head"] == printed["head"]


def test_a_rechained_record_fails_the_kept_head_and_the_signature(runs, tmp_path, capsys):
    run_dir = _copy(runs, tmp_path)
    _sql(run_dir, *EDITS["epsilon"][0])
    rechain(run_dir)
    assert _verify(run_dir, capsys)[0] == 0  # the chain alone cannot tell
    code, result = _verify(run_dir, capsys, "--public-key", str(runs[1] / "key.pub"))
    assert code == 1 and "re-chained" in result["first"]
    code, result = _verify(run_dir, capsys, "--head", runs[2]["a"]["chain"]["head"])
    assert code == 1 and "not in the recomputed chain" in result["first"]
    unsigned = tmp_path / "unsigned"
    shutil.copytree(runs[1] / "b", unsigned)
    code, result = _verify(unsigned, capsys, "--public-key", str(runs[1] / "key.pub"))
    assert code == 1 and "not signed" in result["first"]


def test_bad_input_exits_2(runs, tmp_path, capsys):
    run_dir = _copy(runs, tmp_path)
    for argv, named in (
        (["verify", str(tmp_path / "nothing")], "no such run directory"),
        (["verify", str(run_dir), "--head", "xy"], "64 hexadecimal digits"),
        (["verify", str(run_dir), "--public-key", str(run_dir / "report.json")], "public key"),
        (["simulate", str(QUICKSTART), "--out", str(tmp_path / "new"), "--sign-key",
          str(tmp_path / "new" / "key.pem")], "outside the run directory"),
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and named in err[0], err


def test_simulate_signs_with_a_key_kept_outside_the_run(runs, tmp_path, capsys):
    run_dir = _copy(runs, tmp_path)
    key = Ed25519PrivateKey.generate()
    private, public = tmp_path / "key.pem", tmp_path / "key.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    capsys.readouterr()
    assert main(["simulate", "--resume", str(run_dir), "--sign-key", str(private), "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)["chain"]
    assert chain["signature"]["head"] == chain["head"]
    code, result = _verify(run_dir, capsys, "--public-key", str(public))
    assert code == 0 and result["anchor"] == {"seq": chain["entries"], "head": chain["head"],
                                              "entries_after": 0}
    code, result = _verify(run_dir, capsys, "--public-key", str(runs[1] / "key.pub"))
    assert code == 1 and "not a signature of its head by this public key" in result["first"]
