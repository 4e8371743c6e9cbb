"""When report.html is written: at the end of a run, by ``fedpriv report``, and after every
completed round under ``fedpriv report --watch`` (driven here by a fake clock)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fedpriv.audit import AuditStore, report_run, write_report
from fedpriv.audit.watch import watch_reports
from fedpriv.errors import InputError
from workflows.cli.main import main


def _round(store: AuditStore, rnd: int) -> None:
    store.begin_round(rnd)
    meta = {"mechanism": "gaussian", "mechanism_params": {"clip": 1.0}, "formal_guarantee": True,
            "local_steps": 1, "num_examples": 8}  # fmt: skip
    store.write_update(rnd, 0, [np.zeros(3)], meta)
    store.write_tally(rnd, 0, {"epsilon": 0.5 * rnd, "delta": 1e-5})
    store.complete_round(rnd, {"accuracy": 0.1 * rnd, "loss": 1.0 / rnd})


@pytest.fixture
def store(tmp_path):
    with AuditStore.create(tmp_path / "run", {"rounds": 3}, seed=0) as s:
        yield s


def test_html_is_written_once_the_run_is_over(store):
    _round(store, 1)
    during = write_report(store)  # the per-round rebuild of a running run: cheap, no page
    assert "html" not in during["files"] and not (store.run_dir / "report.html").exists()
    store.mark_status("completed")
    final = write_report(store)  # the last rebuild of a run
    assert final["files"]["html"] == str(store.run_dir / "report.html")
    assert (store.run_dir / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE")


def test_fedpriv_report_writes_html_while_the_run_goes(store, tmp_path):
    _round(store, 1)
    report = report_run(store.run_dir, tmp_path / "out")
    assert report["status"] == "running" and report["files"]["html"].endswith("report.html")
    assert "html" not in write_report(store, tmp_path / "out2", html=False)["files"]


def test_watch_renders_after_each_completed_round_and_stops_with_the_run(store):
    steps = iter([lambda: _round(store, 1), lambda: None, lambda: _round(store, 2),
                  lambda: store.mark_status("completed")])  # fmt: skip
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        next(steps)()

    renders = list(watch_reports(store.run_dir, interval=0.25, sleep=sleep))
    assert [r["completed_rounds"] for r, _ in renders] == [[], [1], [1, 2], [1, 2]]
    assert [r["status"] for r, _ in renders] == ["running"] * 3 + ["completed"]
    assert sleeps == [0.25] * 4 and all(seconds > 0 for _, seconds in renders)
    assert (store.run_dir / "report.html").is_file()


@pytest.mark.parametrize("interval", [0, -1.0, float("nan"), float("inf")])
def test_watch_refuses_a_bad_interval(store, interval):
    with pytest.raises(InputError, match="--interval"):
        next(watch_reports(store.run_dir, interval=interval))


def test_watch_command_on_a_finished_run_renders_once(store, capsys):
    _round(store, 1)
    store.mark_status("completed")
    assert main(["report", str(store.run_dir), "--watch", "--interval", "0.1"]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert re.search(r"round 1 \(1 completed, run completed\): wrote .*report\.html in ", lines[0])


def test_watch_command_input_errors_exit_2(store, tmp_path, capsys):
    assert main(["report", str(store.run_dir), "--watch", "--interval", "0"]) == 2
    assert not (store.run_dir / "report.json").exists()
    assert main(["report", str(tmp_path / "nowhere"), "--watch"]) == 2
    assert "--interval" in capsys.readouterr().err
