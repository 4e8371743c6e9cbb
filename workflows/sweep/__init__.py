"""Mechanisms compared at matched ε or given noise, over batch sizes and seeds: account,
train, attack, tabulate, plot (``fedpriv sweep``).

Names are imported on first use (:mod:`fedpriv.lazy`): every config load imports the
``[sweep]`` section (:mod:`workflows.sweep.config`, through :mod:`workflows.config`), which
must not import the sweep itself (its plan, runner, figures and study pages). Importing this
package imports neither torch nor Flower; runs go through ``workflows.simulation.simulate``,
imported when the first run starts.
"""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__ = lazy_exports(__name__, {
    **dict.fromkeys(("Cell", "SweepSetting", "account_cell", "baseline_cell", "cell_config",
                     "check_sweepable", "plan_cell", "plan_cells", "probe_config", "run_key",
                     "sweep_setting"), "plan"),
    **dict.fromkeys(("ROW_KEYS", "RUN_KEYS", "aggregate", "run_row", "write_csv"), "results"),
    **dict.fromkeys(("RESULTS_CSV", "RESULTS_JSON", "RUNS_CSV", "STUDY", "STUDY_HTML", "Runner",
                     "run_sweep"), "run"),
    "SweepDir": "state",
})
