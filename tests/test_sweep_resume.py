"""A sweep with a stubbed runner: resumability, refused directories, output contract, study."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from fedpriv.errors import InputError
from fedpriv.leakage.capacity import log_capacity_gaussian, log_capacity_vmf
from workflows.config import Config, config_from_dict
from workflows.sweep import RESULTS_CSV, ROW_KEYS, RUN_KEYS, RUNS_CSV, STUDY, STUDY_HTML, run_sweep
from workflows.sweep.figures import FIGURES

RAW = {
    "rounds": 3,
    "data": {"num_clients": 2},
    "train": {"batch_size": 32, "local_steps": 2},
    "mechanism": {"clip": 0.5},
    "audit": {"ground_truth": True},
    "sweep": {"epsilons": [10, 2], "mechanisms": ["gaussian", "vmf"], "attack_iterations": 5},
}
CONTRACT = ("mechanism", "epsilon", "noise_multiplier", "kappa", "laplace_scale", "accuracy",
            "mse", "ssim", "log_capacity", "prior_ssim", "prior_psnr", "gain_ssim", "gain_psnr")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class StubRunner:
    """Stands in for the simulation: records its calls, returns a report with the same keys
    (VMF made to leak less and learn less than Gaussian), optionally fails on call ``fail_on``."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[tuple[Config, Path]] = []
        self.fail_on = fail_on

    def __call__(self, cfg: Config, run_dir: Path) -> dict[str, Any]:
        self.calls.append((cfg, run_dir))
        assert not run_dir.exists()  # an interrupted attempt's leftovers were removed
        run_dir.mkdir(parents=True)
        (run_dir / "partial").write_text("half a run")
        if self.fail_on == len(self.calls):
            raise KeyboardInterrupt
        vmf = cfg.mechanism.name == "vmf"
        shift = 0.01 * cfg.seed  # seeds differ a little
        attack = {"attack_id": 1, "round": 1, "mse": (0.3 if vmf else 0.1) + shift,
                  "ssim": 0.2, "psnr": 10.0, "best_ssim": 0.4, "label_accuracy": 1.0,
                  "prior": {"baseline": "label", "ssim": 0.5, "psnr": 14.0},
                  "gain": {"ssim": -0.3, "psnr": -4.0},
                  "no_update_prior": {"baseline": "no_update", "ssim": 0.1, "psnr": 9.0},
                  "no_update_gain": {"ssim": 0.1, "psnr": 1.0},
                  "identification": {"log_value": 1.2, "log_lower": 0.4, "log_bound": 3.9}}
        clients = [{"client_id": c, "epsilon": 0.5, "attack": attack if c == 0 else None}
                   for c in range(cfg.data.num_clients)]
        return {"accuracy": [0.5, 0.2 if vmf else 0.8], "clients": clients, "wall_seconds": 1.0}


@pytest.fixture(scope="module")
def cfg():
    return config_from_dict(RAW)


@pytest.fixture(scope="module")
def finished(cfg, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    runner = StubRunner()
    return out, runner, run_sweep(cfg, out, runner=runner)


def test_every_cell_runs_once_with_its_calibrated_mechanism(finished):
    _, runner, result = finished
    ran = sorted((c.mechanism.name, c.mechanism.value("kappa") if c.mechanism.name == "vmf"
                  else c.mechanism.value("noise_multiplier")) for c, _ in runner.calls)
    assert [m for m, _ in ran] == ["gaussian", "gaussian", "vmf", "vmf"]
    by_row = sorted((r["mechanism"], r[r["parameter_name"]]) for r in result["rows"])
    assert ran == by_row
    assert len(result["cells_run"]) == 4 and result["cells_resumed"] == []


def test_rerun_with_the_same_out_runs_nothing(cfg, finished):
    out, _, first = finished
    runner = StubRunner()
    again = run_sweep(cfg, out, runner=runner)
    assert runner.calls == []
    assert sorted(again["cells_resumed"]) == sorted(first["cells_run"])
    assert again["rows"] == first["rows"] and again["runs"] == first["runs"]


def test_interrupted_sweep_continues_from_the_finished_cells(cfg, tmp_path):
    failing = StubRunner(fail_on=2)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, tmp_path, runner=failing)
    assert len(list((tmp_path / "cells").glob("*.json"))) == 1
    runner = StubRunner()
    result = run_sweep(cfg, tmp_path, runner=runner)
    assert len(runner.calls) == 3 and len(result["cells_resumed"]) == 1
    assert runner.calls[0][1] == failing.calls[1][1]  # the interrupted cell ran again


def test_a_different_config_in_the_same_out_is_refused(finished):
    out, _, _ = finished
    other = config_from_dict({**RAW, "sweep": {**RAW["sweep"], "epsilons": [10, 3]}})
    runner = StubRunner()
    with pytest.raises(InputError) as err:
        run_sweep(other, out, runner=runner)
    assert err.value.key == "--out" and "sweep.epsilons" in err.value.allowed
    assert runner.calls == []


def test_a_foreign_directory_is_refused(cfg, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError) as err:
        run_sweep(cfg, tmp_path, runner=StubRunner())
    assert err.value.key == "--out"


def test_rows_csv_and_json_follow_the_contract(finished):
    out, _, result = finished
    assert all(tuple(r) == ROW_KEYS for r in result["rows"])
    assert all(tuple(r) == RUN_KEYS for r in result["runs"])
    assert set(CONTRACT) <= set(ROW_KEYS)
    with open(out / RESULTS_CSV, newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == ROW_KEYS and len(table) == 4
    assert {(r["prior_ssim"], r["gain_ssim"], r["gain_psnr"]) for r in table} == {
        ("0.5", "-0.3", "-4.0")}
    with open(out / RUNS_CSV, newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == 4
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["rows"] == result["rows"] and saved["figures"] == result["figures"]
    for row in result["rows"]:
        own = row["parameter_name"]
        assert row[own] > 0
        assert all(row[k] is None for k in ("noise_multiplier", "kappa", "laplace_scale")
                   if k != own)
        assert row["achieved_epsilon"] <= row["epsilon"]
        assert row["mse"] == (0.3 if row["mechanism"] == "vmf" else 0.1)
        assert row["attacked_updates"] == 1 and row["mse_ci"] is None and row["seeds"] == 1


def test_log_capacity_is_that_of_one_update_at_record_level(finished, cfg):
    """local_steps releases; radius C; Gaussian noise std σC on the sum (privacy-math §5)."""
    _, _, result = finished
    clip, steps = cfg.mechanism.value("clip"), cfg.train.local_steps
    for row in result["rows"]:
        if row["mechanism"] == "gaussian":
            one = log_capacity_gaussian(row["dim"], clip, row["noise_multiplier"] * clip)
        else:
            one = log_capacity_vmf(row["dim"], row["kappa"])
        assert row["log_capacity"] == pytest.approx(steps * one, rel=1e-12)
        assert row["log_capacity_cumulative"] == pytest.approx(cfg.rounds * steps * one)
        assert row["steps"] == cfg.rounds * steps


def test_figures_are_valid_pngs(finished):
    out, _, result = finished
    assert [Path(f).name for f in result["figures"]] == list(FIGURES)
    for path in result["figures"]:
        assert Path(path).parent == out
        assert Path(path).read_bytes()[:8] == PNG_SIGNATURE
        with Image.open(path) as image:
            image.verify()
            assert min(image.size) >= 400


def test_study_states_what_the_rows_say(finished):
    out, _, result = finished
    text = (out / STUDY).read_text(encoding="utf-8")
    assert result["study"] == str(out / STUDY)
    assert "VMF MSE 0.3 vs Gaussian 0.1" in text
    assert "VMF has the higher MSE at 2, the lower SSIM at 0 and the lower accuracy at 2" in text
    assert "Calibrated ε ≤ target in 4/4 cells" in text
    assert "| no-update prior SSIM | gain over it | label prior SSIM | gain over it |" in text
    assert "gain over the label prior" in text and "ranges over [-0.3, -0.3]" in text
    assert "gain of the reconstruction over the no-update prior" in text
    assert "ranges over [0.1, 0.1]" in text
    assert "One seed per cell" in text
    by = {(r["mechanism"], r["epsilon"]): r for r in result["rows"]}
    vmf, gauss = by[("vmf", 2.0)], by[("gaussian", 2.0)]
    ratio = vmf["gaussian_equivalent_sigma"] / gauss["noise_multiplier"]
    assert f"{ratio:.2f}× at ε = 2" in text
    assert all(f"]({name})" in text for name in FIGURES)
    assert "digits" in text and "MNIST" in text


def test_study_html_says_the_same_with_the_figures_embedded(finished):
    import base64
    import re

    out, _, result = finished
    page = (out / STUDY_HTML).read_text(encoding="utf-8")
    assert result["study_html"] == str(out / STUDY_HTML)
    assert "VMF MSE 0.3 vs Gaussian 0.1" in page and "<table>" in page
    assert "<script" not in page and "default-src 'none'" in page
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert len(sources) == len(FIGURES) and all(s.startswith("data:image/png;base64,")
                                                 for s in sources)  # fmt: skip
    embedded = [base64.b64decode(s.split(",", 1)[1]) for s in sources]
    assert embedded == [(out / name).read_bytes() for name in FIGURES]  # in study.md's order
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', page))


def test_study_html_refuses_an_image_that_is_not_a_figure(tmp_path):
    from workflows.sweep.study_html import study_html

    with pytest.raises(ValueError, match="elsewhere.png"):
        study_html("# t\n\n![x](http://example.org/elsewhere.png)\n", [])


def test_an_unreachable_epsilon_stops_the_sweep_before_any_run(tmp_path):
    bad = config_from_dict({**RAW, "sweep": {**RAW["sweep"], "epsilons": [10, 1e-9]}})
    runner = StubRunner()
    with pytest.raises(InputError) as err:
        run_sweep(bad, tmp_path, runner=runner)
    assert err.value.key == "sweep.epsilons"
    assert runner.calls == [] and not list((tmp_path / "cells").glob("*.json"))
