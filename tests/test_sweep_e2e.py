"""End to end: a tiny real sweep from the command line (Flower simulation on Ray per cell)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflows.cli.main import main
from workflows.sweep.figures import FIGURES

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
TINY = [
    "rounds=2", "data.num_clients=2", "train.batch_size=8", "train.lr=1.0",
    "sweep.epsilons=[5]", 'sweep.mechanisms=["gaussian", "vmf"]', "sweep.attack_iterations=20",
    "sweep.attack_clients=2",
]  # fmt: skip


def _sweep(out: Path, capsys, extra: tuple[str, ...] = ()) -> tuple[int, dict | None, str]:
    argv = ["sweep", str(CONFIGS / "paper-compare-quick.toml"), "--out", str(out), "--json"]
    for item in (*TINY, *extra):
        argv += ["--set", item]
    code = main(argv)
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else None, captured.err


def test_bad_sweep_flag_exits_2_before_any_work(tmp_path, capsys):
    code = main(["sweep", str(CONFIGS / "paper-compare-quick.toml"), "--out", str(tmp_path / "x"),
                 "--set", "sweep.mechanisms=[\"none\"]", "--json"])
    assert code == 2
    assert "sweep.mechanisms" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_bad_worker_count_exits_2_before_any_work(tmp_path, capsys):
    code = main(["sweep", str(CONFIGS / "paper-compare-quick.toml"), "--out", str(tmp_path / "x"),
                 "--workers", "0", "--json"])
    assert code == 2 and "--workers" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_tiny_sweep_runs_audits_and_resumes(tmp_path, capsys):
    out = tmp_path / "sweep"
    code, result, _ = _sweep(out, capsys)
    assert code == 0
    assert {r["mechanism"] for r in result["rows"]} == {"gaussian", "vmf"}
    runs = {r["mechanism"]: r for r in result["runs"]}  # one seed: one run per cell
    assert set(runs) == {"gaussian", "vmf"}
    for mech, row in runs.items():
        report = json.loads((Path(row["run_dir"]) / "report.json").read_text())
        # the run's own auditor (a separate ledger, per client) agrees with the calibration
        assert row["run_epsilon"] == pytest.approx(row["achieved_epsilon"], rel=1e-9)
        assert row["run_epsilon"] <= row["epsilon"]
        # ... and tallied the same cumulative record-level capacity
        cumulative = max(c["log_bayes_capacity"] for c in report["clients"])
        assert cumulative == pytest.approx(row["log_capacity_cumulative"], rel=1e-9)
        assert report["clients"][0]["mechanism"] == mech
        assert row["accuracy"] == report["accuracy"][-1]
        assert row["attacked_updates"] == 2 and 0 <= row["ssim"] <= 1 and row["mse"] > 0
    assert [Path(f).name for f in result["figures"]] == list(FIGURES)
    assert (out / "cells" / "gaussian-eps5-L8-seed0.npz").is_file()
    code, again, _ = _sweep(out, capsys)
    assert code == 0 and again["cells_run"] == [] and again["rows"] == result["rows"]
    code, _, err = _sweep(out, capsys, ("sweep.attack_iterations=21",))
    assert code == 2 and "--out" in err and "sweep.attack_iterations" in err
