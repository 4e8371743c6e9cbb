"""A recorded sweep's ε, re-accounted without re-running it.

A cell's ε depends on its release alone — the mechanism, its noise parameter, the released
dimension, the sampling rate, the number of releases and δ — never on what the runs trained,
so a study recorded under one accountant can be re-accounted under another: the runs'
accuracies and attack scores stay as recorded. This script reads ``results.csv`` and
``runs.csv`` of a sweep directory, accounts every cell with an explicit noise parameter by
``fedpriv.accounting.epsilon`` (the same call the sweep's planner and the runs' ledgers make,
privacy-math.md §15: ``tightest`` by default), and prints old and new ε per cell as JSON.
``--write`` rewrites the ε columns (``epsilon``, ``achieved_epsilon``, ``epsilon_per_epoch``,
``run_epsilon``, ``accountant``, ``route``) of both files (``runs.csv`` where the recording
kept one) and redraws
``accuracy_vs_epsilon.png``. ``run_epsilon`` is what a run's ledger tallies for its client with
the largest sampling rate, which the sweep's setting accounts: the same events, so the same
number. Cells calibrated to a target ε are refused (their noise would change with the
accountant: re-run those).

    python benchmarks/study_epsilon.py docs/results/paper-fmnist-recipe --write --num-classes 10
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fedpriv.accounting import ReleaseEvent, epsilon  # noqa: E402
from fedpriv.audit.config import DEFAULT_ACCOUNTANT  # noqa: E402
from fedpriv.errors import InputError  # noqa: E402
from fedpriv.mechanisms import make_release  # noqa: E402
from workflows.sweep.figures import write_accuracy_figure  # noqa: E402
from workflows.sweep.results import write_csv  # noqa: E402
from workflows.sweep.run import RESULTS_CSV, RUNS_CSV  # noqa: E402

__all__ = ["main", "reaccount"]

_COLUMNS = ("epsilon", "achieved_epsilon", "epsilon_per_epoch", "run_epsilon", "accountant",
            "route")


def _read(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    if not path.is_file():
        raise InputError("DIR", str(path.parent), f"a sweep directory holding {path.name}")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [{k: (None if v == "" else v) for k, v in row.items()} for row in reader]
        return list(reader.fieldnames or ()), rows


def _accounted(row: dict[str, Any], accountant: str) -> dict[str, Any]:
    """The ε columns of one row with a noise parameter, under ``accountant``."""
    if row.get("target_epsilon") is not None:
        raise InputError("results.csv", row["cell"], "cells with an explicit noise parameter "
                         "(a calibrated cell's noise depends on the accountant: re-run it)")
    name = row["parameter_name"]
    release = make_release(row["mechanism"], float(row[name]), int(float(row["dim"])))
    q, steps, delta = float(row["sample_rate"]), int(float(row["steps"])), float(row["delta"])

    def account(count: int) -> Any:
        return epsilon([ReleaseEvent(release, q, count)], delta, accountant=accountant)

    result = account(steps)
    per_epoch = account(max(1, round(steps * q))).epsilon
    return {"epsilon": result.epsilon, "achieved_epsilon": result.epsilon,
            "epsilon_per_epoch": per_epoch, "run_epsilon": result.epsilon,
            "accountant": accountant, "route": result.route}


def reaccount(directory: Path, accountant: str = DEFAULT_ACCOUNTANT, write: bool = False,
              num_classes: int | None = None) -> dict[str, Any]:
    """Re-account ``directory``'s cells (module docstring); returns the JSON document.
    ``num_classes`` draws the chance level on the redrawn figure, as the sweep does."""
    columns, rows = _read(directory / RESULTS_CSV)
    has_runs = (directory / RUNS_CSV).is_file()  # older recordings kept results.csv alone
    run_columns, runs = _read(directory / RUNS_CSV) if has_runs else ([], [])
    cells: list[dict[str, Any]] = []
    accounted: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.get("parameter_name") is None:
            continue
        start = time.perf_counter()
        new = _accounted(row, accountant)
        accounted[row["cell"]] = new
        cells.append({"cell": row["cell"], "old": {k: row.get(k) for k in _COLUMNS},
                      "new": new, "seconds": round(time.perf_counter() - start, 3)})
    if write:
        for row in [*rows, *runs]:
            row.update(accounted.get(row["cell"], {}))
        write_csv(rows, directory / RESULTS_CSV, columns)
        if has_runs:
            write_csv(runs, directory / RUNS_CSV, run_columns)
        figure_rows = [{**r, "batch_size": int(float(r["batch_size"]))} for r in rows]
        write_accuracy_figure(figure_rows, directory, num_classes)
    return {"directory": str(directory), "accountant": accountant, "written": write,
            "cells": cells}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print the JSON document; exit 2 with one line on bad input."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, help="a sweep's output directory")
    parser.add_argument("--accountant", default=DEFAULT_ACCOUNTANT,
                        choices=["tightest", "pld", "rdp"])
    parser.add_argument("--write", action="store_true",
                        help="rewrite results.csv, runs.csv and accuracy_vs_epsilon.png")
    parser.add_argument("--num-classes", type=int, metavar="K",
                        help="the data set's classes: the redrawn figure's chance level")
    args = parser.parse_args(argv)
    try:
        out = reaccount(args.directory, args.accountant, args.write, args.num_classes)
    except InputError as exc:
        print(f"study_epsilon: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
