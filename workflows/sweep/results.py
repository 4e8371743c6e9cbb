"""One result row per cell, from the cell's run report; ``results.csv``.

A row holds the contract keys of ``fedpriv sweep`` (architecture.md: ``mechanism``, ``epsilon``
— the target —, ``noise_multiplier`` / ``kappa`` / ``laplace_scale``, ``accuracy``, ``mse``,
``ssim``, ``log_capacity``) and what a reader needs to trust them: the calibrated ε, the ε the
run's own auditor tallied, the accounting setting, and how many updates were attacked.

Reconstruction scores are means over the attacked updates (round 1, the first
``sweep.attack_clients`` clients) of each update's batch-mean score, with the standard error
across updates when there are two or more. ``log_capacity`` is the record-level (or, with
``audit.threat_model = "batch"``, batch-level) log Bayes capacity of one attacked update —
``local_steps`` releases (privacy-math.md §5); ``log_capacity_cumulative`` covers the whole run
(``T`` releases, the upper bound of §5 "Across rounds").
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedpriv.atomic import atomic_write_bytes
from fedpriv.config import Config
from fedpriv.mechanisms import accountable, release_class
from workflows.sweep.plan import Cell, SweepSetting

__all__ = ["PARAMETER_COLUMNS", "ROW_KEYS", "cell_row", "update_log_capacity", "write_csv"]

PARAMETER_COLUMNS = tuple(release_class(name).parameter_name for name in accountable())
ROW_KEYS = (
    "mechanism", "epsilon", "achieved_epsilon", "run_epsilon", "delta", "accountant", "route",
    "parameter_name", *PARAMETER_COLUMNS, "gaussian_equivalent_sigma", "sample_rate", "steps",
    "dim", "accuracy", "mse", "mse_se", "psnr", "ssim", "ssim_se", "best_ssim",
    "relative_leakage", "label_accuracy", "attacked_updates", "attack", "attack_iterations",
    "log_capacity", "log_capacity_cumulative", "threat_model", "run_dir", "wall_seconds",
)  # fmt: skip
"""Columns of ``results.csv`` and keys of every row, in order."""


def update_log_capacity(cfg: Config, cell: Cell, dim: int) -> float:
    """log Bayes capacity of one round's update (``local_steps`` releases) under the run's
    threat model: ``local_steps · log C`` of the cell's mechanism (privacy-math.md §5)."""
    from fedpriv.ledger import secret_radius_units
    from fedpriv.mechanisms import build_mechanism

    params = {**cfg.mechanism.params, cell.parameter_name: cell.parameter}
    release = build_mechanism(cell.mechanism, params).release(dim)
    radius = secret_radius_units(cfg.audit.threat_model, cfg.train.batch_size)
    return cfg.train.local_steps * release.log_bayes_capacity(dim, radius)


def _mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if finite.size == 0:
        return None, None
    se = float(finite.std(ddof=1) / math.sqrt(finite.size)) if finite.size > 1 else None
    return float(finite.mean()), se


def _attack_scores(report: Mapping[str, Any]) -> dict[str, Any]:
    attacks = [c["attack"] for c in report.get("clients", []) if c.get("attack")]
    out: dict[str, Any] = {"attacked_updates": len(attacks)}
    for key in ("mse", "ssim", "psnr", "best_ssim", "relative_leakage", "label_accuracy"):
        mean, se = _mean_se([a.get(key) for a in attacks])
        out[key] = mean
        if key in ("mse", "ssim"):
            out[f"{key}_se"] = se
    return out


def _run_epsilon(report: Mapping[str, Any]) -> float | None:
    """The largest cumulative ε the run's auditor tallied for any client."""
    values = [c.get("epsilon") for c in report.get("clients", [])]
    numbers = [float(v) for v in values if v is not None]
    return max(numbers) if numbers else None


def cell_row(
    cfg: Config, setting: SweepSetting, cell: Cell, report: Mapping[str, Any], run_dir: Path
) -> dict[str, Any]:
    """The result row of ``cell`` from its run ``report`` (the ``simulate`` JSON object)."""
    accuracy = report.get("accuracy") or []
    per_update = update_log_capacity(cfg, cell, setting.dim)
    row: dict[str, Any] = {
        "mechanism": cell.mechanism, "epsilon": cell.target_epsilon,
        "achieved_epsilon": cell.epsilon, "run_epsilon": _run_epsilon(report),
        "delta": setting.delta, "accountant": setting.accountant, "route": cell.route,
        "parameter_name": cell.parameter_name,
        **{k: cell.parameter if k == cell.parameter_name else None for k in PARAMETER_COLUMNS},
        "gaussian_equivalent_sigma": cell.release(setting.dim).gaussian_equivalent(setting.dim),
        "sample_rate": setting.sample_rate, "steps": setting.steps, "dim": setting.dim,
        "accuracy": accuracy[-1] if accuracy else None,
        **_attack_scores(report),
        "attack": cfg.sweep.attack, "attack_iterations": cfg.sweep.attack_iterations,
        "log_capacity": per_update,
        "log_capacity_cumulative": per_update * cfg.rounds,
        "threat_model": cfg.audit.threat_model, "run_dir": str(run_dir),
        "wall_seconds": report.get("wall_seconds"),
    }  # fmt: skip
    return {key: row[key] for key in ROW_KEYS}


def _csv_value(value: Any) -> Any:
    return "" if value is None else value


def write_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Write ``rows`` to ``path`` (columns :data:`ROW_KEYS`; empty cells for None), atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=ROW_KEYS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in ROW_KEYS})
    atomic_write_bytes(path, buffer.getvalue().encode())
