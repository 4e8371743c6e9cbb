"""Run a sweep: calibrate, train and attack every (mechanism, ε) cell, then tabulate and plot.

Each cell is one ordinary audited federated run (``strategies.simulation.simulate``, the
Flower simulation on Ray that ``fedpriv simulate`` uses, imported only when a cell runs) of the
per-cell configuration :func:`workflows.sweep.plan.cell_config`: the same clients, FedAvg and
DP-SGD code, the honest-but-curious server attacking round 1. Finished cells are kept in the
output directory (:class:`workflows.sweep.state.SweepDir`), so an interrupted sweep resumes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedpriv.config import Config
from fedpriv.jsonio import write_json
from workflows.sweep.examples import example_images
from workflows.sweep.figures import write_figures
from workflows.sweep.plan import (
    Cell,
    SweepSetting,
    cell_config,
    cell_key,
    check_sweepable,
    plan_cell,
    sweep_setting,
)
from workflows.sweep.results import cell_row, write_csv
from workflows.sweep.state import SweepDir
from workflows.sweep.study import study_markdown, write_study
from workflows.sweep.study_html import write_study_html

__all__ = [
    "RESULTS_CSV", "RESULTS_JSON", "STUDY", "STUDY_HTML", "Runner", "run_sweep",
    "simulate_runner",
]  # fmt: skip

RESULTS_CSV = "results.csv"
RESULTS_JSON = "results.json"
STUDY = "study.md"
STUDY_HTML = "study.html"
Runner = Callable[[Config, Path], dict[str, Any]]
"""Runs one cell's configuration into a run directory and returns its ``simulate`` report."""

log = logging.getLogger(__name__)


def simulate_runner(verbose: bool = False) -> Runner:
    """The default runner: a Flower simulation on Ray per cell."""

    def run(cfg: Config, run_dir: Path) -> dict[str, Any]:
        from strategies.simulation import simulate

        return simulate(cfg, run_dir, verbose=verbose)

    return run


def _plan_unfinished(cfg: Config, setting: SweepSetting, state: SweepDir) -> dict[str, Cell]:
    """Calibrate every cell not finished yet — all before any runs, so an unreachable ε stops
    the sweep before work starts."""
    cells = {}
    for mechanism in cfg.sweep.mechanisms:
        for epsilon in sorted(cfg.sweep.epsilons):
            if state.finished(cell_key(mechanism, epsilon)) is None:
                cell = plan_cell(setting, mechanism, epsilon)
                cells[cell.key] = cell
    return cells


def _run_cell(
    cfg: Config, setting: SweepSetting, state: SweepDir, cell: Cell, runner: Runner
) -> dict[str, Any]:
    """Run and record one calibrated cell; return its finished record."""
    log.info("cell %s: %s = %.6g (calibrated epsilon %.6g, route %s)", cell.key,
             cell.parameter_name, cell.parameter, cell.epsilon, cell.route)
    run_dir = state.fresh_run_dir(cell.key)
    report = runner(cell_config(cfg, cell), run_dir)
    row = cell_row(cfg, setting, cell, report, run_dir)
    state.save_images(cell.key, example_images(run_dir, report))
    state.finish(cell, row)
    return state.finished(cell.key)


def _key(row: dict[str, Any]) -> str:
    return cell_key(row["mechanism"], row["epsilon"])


def run_sweep(cfg: Config, out_dir: Path | str, *, runner: Runner | None = None) -> dict[str, Any]:
    """Run (or resume) the sweep of ``cfg`` into ``out_dir``; return the ``sweep`` JSON object.

    Parameters
    ----------
    cfg
        A validated configuration with a ``[sweep]`` section.
    out_dir
        Output directory (see :mod:`workflows.sweep.state`); re-use it to resume.
    runner
        Runs one cell (default :func:`simulate_runner`); tests pass a stub.

    Raises
    ------
    InputError
        A setting a sweep cannot honour, an unreachable ε, or an ``out_dir`` of another sweep.
    """
    start = time.monotonic()
    check_sweepable(cfg)
    out = Path(out_dir)
    state = SweepDir(out, cfg)
    setting = sweep_setting(cfg)
    runner = runner or simulate_runner()
    todo = _plan_unfinished(cfg, setting, state)
    rows, images = [], {}
    for mechanism in cfg.sweep.mechanisms:
        for epsilon in sorted(cfg.sweep.epsilons):
            key = cell_key(mechanism, epsilon)
            done = state.finished(key) or _run_cell(cfg, setting, state, todo[key], runner)
            rows.append(done["row"])
            images[key] = state.load_images(key)
    figures = write_figures(rows, out, images, setting.num_classes)
    write_csv(rows, out / RESULTS_CSV)
    result = {
        "out_dir": str(out), "rows": rows, "figures": figures,
        "results_csv": str(out / RESULTS_CSV),
        "study": write_study(out / STUDY, cfg, setting, rows, figures),
        "study_html": write_study_html(
            out / STUDY_HTML, study_markdown(cfg, setting, rows, figures), figures
        ),
        "setting": setting.as_dict(), "cells_run": list(todo),
        "cells_resumed": [k for k in map(_key, rows) if k not in todo],
        "wall_seconds": time.monotonic() - start,
    }  # fmt: skip
    write_json(out / RESULTS_JSON, result)
    return result
