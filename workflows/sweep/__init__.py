"""Mechanisms compared at matched ε or given noise, over batch sizes and seeds: account,
train, attack, tabulate, plot (``fedpriv sweep``).

Importing this package imports neither torch nor Flower; runs go through
``workflows.simulation.simulate``, imported when the first run starts.
"""

from workflows.sweep.plan import (
    Cell,
    SweepSetting,
    account_cell,
    baseline_cell,
    cell_config,
    check_sweepable,
    plan_cell,
    plan_cells,
    probe_config,
    run_key,
    sweep_setting,
)
from workflows.sweep.results import ROW_KEYS, RUN_KEYS, aggregate, run_row, write_csv
from workflows.sweep.run import (
    RESULTS_CSV,
    RESULTS_JSON,
    RUNS_CSV,
    STUDY,
    STUDY_HTML,
    Runner,
    run_sweep,
)
from workflows.sweep.state import SweepDir

__all__ = [
    "RESULTS_CSV",
    "RESULTS_JSON",
    "ROW_KEYS",
    "RUNS_CSV",
    "RUN_KEYS",
    "STUDY",
    "STUDY_HTML",
    "Cell",
    "Runner",
    "SweepDir",
    "SweepSetting",
    "account_cell",
    "aggregate",
    "baseline_cell",
    "cell_config",
    "check_sweepable",
    "plan_cell",
    "plan_cells",
    "probe_config",
    "run_key",
    "run_row",
    "run_sweep",
    "sweep_setting",
    "write_csv",
]
