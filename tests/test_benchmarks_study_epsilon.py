"""A recorded sweep re-accounted (benchmarks/study_epsilon.py): its ε columns become what
``fedpriv account`` gives for each cell's release, its measurements stay as recorded."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks.study_epsilon import main, reaccount
from fedpriv.commands.account import account
from workflows.sweep.results import ROW_KEYS, RUN_KEYS, write_csv

CELL = {"cell": "gaussian-noise_multiplier1.1-L32", "mechanism": "gaussian", "epsilon": 9.0,
        "achieved_epsilon": 9.0, "epsilon_per_epoch": 1.0, "run_epsilon": 9.0, "delta": 1e-5,
        "accountant": "rdp", "route": "rdp", "parameter_name": "noise_multiplier",
        "noise_multiplier": 1.1, "batch_size": 32, "sample_rate": 0.004, "steps": 1000,
        "epochs": 4.0, "dim": 13_700, "accuracy": 0.7}
BASELINE = {"cell": "none-L32", "mechanism": "none", "epsilon": "inf", "delta": 1e-5,
            "batch_size": 32, "accuracy": 0.8, "accountant": "rdp"}


def _recorded(tmp_path: Path, rows: list[dict]) -> Path:
    write_csv(rows, tmp_path / "results.csv", ROW_KEYS)
    write_csv([{**r, "seed": s} for r in rows for s in (0, 1)], tmp_path / "runs.csv", RUN_KEYS)
    return tmp_path


def _read(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("accountant", ["tightest", "rdp"])
def test_cells_take_the_accountants_epsilon_and_keep_their_measurements(
        tmp_path: Path, accountant: str) -> None:
    out = reaccount(_recorded(tmp_path, [CELL, BASELINE]), accountant, write=True)
    expected = account("gaussian", noise_multiplier=1.1, sample_rate=0.004, steps=1000,
                       accountant=accountant)
    per_epoch = account("gaussian", noise_multiplier=1.1, sample_rate=0.004, steps=4,
                        accountant=accountant)
    assert [c["cell"] for c in out["cells"]] == [CELL["cell"]]
    results = {r["cell"]: r for r in _read(tmp_path / "results.csv")}
    cell = results[CELL["cell"]]
    for key in ("epsilon", "achieved_epsilon", "run_epsilon"):
        assert float(cell[key]) == pytest.approx(expected["epsilon"], rel=1e-12)
    assert float(cell["epsilon_per_epoch"]) == pytest.approx(per_epoch["epsilon"], rel=1e-12)
    assert (cell["accountant"], cell["route"]) == (accountant, expected["route"])
    assert cell["accuracy"] == "0.7" and results["none-L32"]["epsilon"] == "inf"
    runs = [r for r in _read(tmp_path / "runs.csv") if r["cell"] == CELL["cell"]]
    assert len(runs) == 2 and all(float(r["epsilon"]) == float(cell["epsilon"]) for r in runs)
    assert (tmp_path / "accuracy_vs_epsilon.png").stat().st_size > 0


def test_without_write_nothing_changes(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    before = (_recorded(tmp_path, [CELL]) / "results.csv").read_bytes()
    assert main([str(tmp_path), "--accountant", "rdp"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["written"] is False and printed["cells"][0]["old"]["epsilon"] == "9.0"
    assert (tmp_path / "results.csv").read_bytes() == before


def test_calibrated_cells_and_missing_files_are_refused(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    _recorded(tmp_path, [{**CELL, "target_epsilon": 2.0}])
    assert main([str(tmp_path)]) == 2
    assert "re-run it" in capsys.readouterr().err
    assert main([str(tmp_path / "nowhere")]) == 2
