"""Mechanisms compared at matched ε: calibrate, train, attack, tabulate, plot (``fedpriv sweep``).

Importing this package imports neither torch nor Flower; cells run through
``strategies.simulation.simulate``, imported when the first cell runs.
"""

from workflows.sweep.plan import (
    Cell,
    SweepSetting,
    cell_config,
    cell_key,
    check_sweepable,
    plan_cell,
    plan_cells,
    sweep_setting,
)
from workflows.sweep.results import ROW_KEYS, cell_row, write_csv
from workflows.sweep.run import RESULTS_CSV, RESULTS_JSON, STUDY, STUDY_HTML, Runner, run_sweep
from workflows.sweep.state import SweepDir

__all__ = [
    "RESULTS_CSV",
    "RESULTS_JSON",
    "ROW_KEYS",
    "STUDY",
    "STUDY_HTML",
    "Cell",
    "Runner",
    "SweepDir",
    "SweepSetting",
    "cell_config",
    "cell_key",
    "cell_row",
    "check_sweepable",
    "plan_cell",
    "plan_cells",
    "run_sweep",
    "sweep_setting",
    "write_csv",
]
