"""Run a sweep: account every cell, run each with every seed, then tabulate and plot.

Each run is one ordinary audited federated run (``workflows.simulation.simulate``, the Flower
simulation on Ray that ``fedpriv simulate`` uses, imported only when a run starts) of the
per-cell configuration :func:`workflows.sweep.plan.cell_config`: the same clients, strategy
and DP-SGD code, the honest-but-curious server attacking round 1 — or, with
``sweep.attack_on = "first-release"``, a second, one-step run (:func:`~workflows.sweep.plan.
probe_config`) whose update is the training run's first noisy release. Finished runs are kept
in the output directory (:class:`workflows.sweep.state.SweepDir`), so an interrupted sweep
resumes, and several sweep processes can share the directory, each claiming the runs it does
(``fedpriv sweep --workers N``); a progress bar over the runs, with an estimate of the time
left, goes to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedpriv.config import Config
from fedpriv.jsonio import write_json
from workflows.sweep.examples import example_images
from workflows.sweep.figures import write_figures
from workflows.sweep.plan import (
    Cell,
    SweepSetting,
    batch_sizes,
    cell_config,
    check_sweepable,
    plan_cells,
    probe_config,
    run_key,
    seeds,
    sweep_setting,
)
from workflows.sweep.results import RUN_KEYS, aggregate, run_row, write_csv
from workflows.sweep.state import SweepDir
from workflows.sweep.study import study_markdown, write_study
from workflows.sweep.study_html import write_study_html
from workflows.sweep.workers import wait_for_workers

if TYPE_CHECKING:
    from workflows.deploy.processes import ProcessGroup

__all__ = [
    "RESULTS_CSV", "RESULTS_JSON", "RUNS_CSV", "STUDY", "STUDY_HTML", "Runner", "run_sweep",
    "simulate_runner",
]  # fmt: skip

RESULTS_CSV = "results.csv"
RUNS_CSV = "runs.csv"
RESULTS_JSON = "results.json"
STUDY = "study.md"
STUDY_HTML = "study.html"
Runner = Callable[[Config, Path], dict[str, Any]]
"""Runs one configuration into a run directory and returns its ``simulate`` report."""

log = logging.getLogger(__name__)


def simulate_runner(verbose: bool = False) -> Runner:
    """The default runner: a Flower simulation on Ray per run."""

    def run(cfg: Config, run_dir: Path) -> dict[str, Any]:
        from workflows.simulation import simulate

        return simulate(cfg, run_dir, verbose=verbose)

    return run


def _run(cfg: Config, setting: SweepSetting, cell: Cell, seed: int, state: SweepDir,
         runner: Runner) -> None:
    """Run, score and record one seed's run of ``cell``."""
    key = run_key(cell, seed)
    log.info("run %s: %s = %s, epsilon %.6g per step (%s)", key, cell.parameter_name,
             cell.parameter, cell.epsilon, cell.route)
    run_dir = state.fresh_run_dir(key)
    train_cfg = cell_config(cfg, setting, cell, seed)
    if cfg.sweep.attack_on == "first-release":
        train = (runner(train_cfg, run_dir / "train"), run_dir / "train")
        probe = (runner(probe_config(train_cfg), run_dir / "probe"), run_dir / "probe")
        attacked = probe
    else:
        train = attacked = (runner(train_cfg, run_dir), run_dir)
        probe = None
    row = run_row(cfg, setting, cell, seed, train, probe)
    state.save_images(key, example_images(attacked[1], attacked[0]))
    state.finish(key, cell, row)


def _progress(total: int, done: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc="sweep", unit="run", file=sys.stderr,
                dynamic_ncols=True)


def run_sweep(
    cfg: Config, out_dir: Path | str, *, runner: Runner | None = None,
    workers: Callable[[Path], ProcessGroup] | None = None,
) -> dict[str, Any]:
    """Run (or resume) the sweep of ``cfg`` into ``out_dir``; return the ``sweep`` JSON object.

    Parameters
    ----------
    cfg
        A validated configuration with a ``[sweep]`` section.
    out_dir
        Output directory (see :mod:`workflows.sweep.state`); re-use it to resume.
    runner
        Runs one configuration (default :func:`simulate_runner`); tests pass a stub.
    workers
        Starts extra sweep processes on ``out_dir`` once every cell is planned (see
        :mod:`workflows.sweep.workers`); they are waited for before the tables are written.

    Raises
    ------
    InputError
        A setting a sweep cannot honour, an unreachable ε, or an ``out_dir`` of another sweep
        — all before any run starts.
    """
    start = time.monotonic()
    check_sweepable(cfg)
    out = Path(out_dir)
    state = SweepDir(out, cfg)
    settings = {b: sweep_setting(cfg, b) for b in batch_sizes(cfg)}
    cells = [(settings[b], cell) for b in settings for cell in plan_cells(cfg, settings[b])]
    planned = [(s, c, seed) for seed in seeds(cfg) for s, c in cells]  # seed-major: early tables
    todo = [p for p in planned if not state.is_finished(run_key(p[1], p[2]))]
    runner = runner or simulate_runner()
    helpers = workers(out) if workers and todo else None
    with helpers or contextlib.nullcontext(), _progress(len(planned),
                                                       len(planned) - len(todo)) as bar:
        ran = _work(cfg, state, todo, runner, bar)  # an error here stops the workers too
        codes = wait_for_workers(helpers)
    if any(codes):
        log.warning("sweep workers exited with %s (see %s)", codes, out / "workers")
    return _tabulate(cfg, out, state, settings, cells, ran, start)


POLL_SECONDS = 5.0
"""How often a process with nothing left to claim looks at runs other processes hold."""


def _work(cfg: Config, state: SweepDir, todo: list[tuple[SweepSetting, Cell, int]],
          runner: Runner, bar: Any) -> list[str]:
    """Run every unfinished run this process can claim, then wait for those other processes
    hold (taking over any whose process died); return the keys this process ran."""
    pending, ran = list(todo), []
    while pending:
        progressed = False
        for item in list(pending):
            setting, cell, seed = item
            key = run_key(cell, seed)
            if not state.is_finished(key):
                if not state.claim(key):
                    continue
                bar.set_postfix_str(key)
                try:
                    _run(cfg, setting, cell, seed, state, runner)
                finally:
                    state.release(key)
                ran.append(key)
                progressed = True
            pending.remove(item)
            bar.update(1)
        if pending and not progressed:
            time.sleep(POLL_SECONDS)
    return ran


def _tabulate(cfg: Config, out: Path, state: SweepDir, settings: dict[int, SweepSetting],
              cells: list[tuple[SweepSetting, Cell]], ran: list[str],
              start: float) -> dict[str, Any]:
    """Rows, tables, figures and the study from the finished runs."""
    runs = {c.key: [state.finished(run_key(c, s))["row"] for s in seeds(cfg)] for _, c in cells}
    rows = [aggregate(cfg, setting, c, runs[c.key]) for setting, c in cells]
    first = seeds(cfg)[0]
    images = {c.key: state.load_images(run_key(c, first)) for _, c in cells}
    some = next(iter(settings.values()))
    figures = write_figures(rows, out, images, some.num_classes)
    write_csv(rows, out / RESULTS_CSV)
    run_rows = [r for _, c in cells for r in runs[c.key]]
    write_csv(run_rows, out / RUNS_CSV, RUN_KEYS)
    markdown = study_markdown(cfg, list(settings.values()), rows, figures)
    result = {
        "out_dir": str(out), "rows": rows, "runs": run_rows, "figures": figures,
        "results_csv": str(out / RESULTS_CSV), "runs_csv": str(out / RUNS_CSV),
        "study": write_study(out / STUDY, markdown),
        "study_html": write_study_html(out / STUDY_HTML, markdown, figures),
        "setting": some.as_dict(), "settings": [s.as_dict() for s in settings.values()],
        "cells_run": ran,
        "cells_resumed": [run_key(c, s) for _, c in cells for s in seeds(cfg)
                          if run_key(c, s) not in ran],
        "wall_seconds": time.monotonic() - start,
    }  # fmt: skip
    write_json(out / RESULTS_JSON, result)
    return result
