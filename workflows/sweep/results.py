"""Result rows: one per seed's run (``runs.csv``), one per cell over its seeds (``results.csv``).

A run row holds what one seed's run measured — the final test accuracy of the training run and
the reconstruction scores of the attacked updates (means over them, with the standard error
across updates when there are two or more) — beside the cell's accounting.

A cell row holds the contract keys of ``fedpriv sweep`` (docs/sweep.md: ``mechanism``,
``epsilon`` — the target of a calibrated cell, else the cell's per-step ε —,
``noise_multiplier`` / ``kappa`` / ``laplace_scale``, ``accuracy``, ``mse``, ``ssim``,
``log_capacity``) and what a reader needs to trust them: for every measured quantity the mean
over the seeds and the half-width of its 95% Student-t interval (``<key>_ci``: ``t₀.₉₇₅,k−1 ·
s/√k`` over ``k`` seeds, absent with one seed); the per-step ε (``achieved_epsilon``), the
per-epoch compatibility ε, the largest ε any run's own auditor tallied, the accounting setting.

``log_capacity`` is the record-level (or, with ``audit.threat_model = "batch"``, batch-level)
log Bayes capacity of the attacked release(s) — one release with the first-release probe,
``local_steps`` releases for a round-1 update (privacy-math.md §5); ``log_capacity_cumulative``
covers every release of the run (``T``, the upper bound of §5 "Across rounds").
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedpriv.accounting.events import Release
from fedpriv.atomic import atomic_write_bytes
from fedpriv.config import Config
from fedpriv.mechanisms import accountable, release_class
from workflows.sweep.plan import Cell, SweepSetting

__all__ = [
    "MEASURED", "PARAMETER_COLUMNS", "ROW_KEYS", "RUN_KEYS", "aggregate", "run_row",
    "student_t_interval", "update_log_capacity", "write_csv",
]  # fmt: skip

PARAMETER_COLUMNS = tuple(release_class(name).parameter_name for name in accountable())
MEASURED = ("accuracy", "mse", "psnr", "ssim", "best_ssim", "relative_leakage",
            "label_accuracy", "prior_ssim", "prior_psnr", "gain_ssim", "gain_psnr",
            "no_update_prior_ssim", "no_update_prior_psnr", "no_update_gain_ssim",
            "no_update_gain_psnr", "support_ssim", "identification_log_value",
            "identification_log_lower", "identification_log_bound")
"""Quantities measured per run, averaged over seeds with a 95% interval in a cell row:
``prior_*``/``gain_*`` are the label prior's (the class means of the recovered labels) and the
gains over it, ``no_update_*`` the no-update prior's (the public mean image) and the gains over
it; ``identification_*`` the within-class identification score (docs/leakage.md)."""
_CELL_KEYS = (
    "cell", "mechanism", "epsilon", "target_epsilon", "achieved_epsilon", "epsilon_per_epoch",
    "run_epsilon", "delta", "accountant", "route", "parameter_name", *PARAMETER_COLUMNS,
    "gaussian_equivalent_sigma", "batch_size", "sample_rate", "steps", "epochs", "dim",
)  # fmt: skip
_TAIL = ("attack", "attack_iterations", "attack_on", "log_capacity", "log_capacity_cumulative",
         "threat_model")
RUN_KEYS = (
    *_CELL_KEYS, "seed", *MEASURED, "mse_se", "ssim_se", "attacked_updates", *_TAIL, "run_dir",
    "probe_dir", "wall_seconds",
)  # fmt: skip
"""Columns of ``runs.csv``: one seed's run."""
ROW_KEYS = (
    *_CELL_KEYS, "seeds", *(k for m in MEASURED for k in (m, f"{m}_ci")), "attacked_updates",
    *_TAIL, "wall_seconds",
)  # fmt: skip
"""Columns of ``results.csv`` and keys of every cell row, in order."""


def update_log_capacity(cfg: Config, cell: Cell, release: Release, dim: int) -> float:
    """log Bayes capacity of one ``release`` of the cell (:meth:`Cell.release`) under the
    run's threat model (privacy-math.md §5; ∞ without a guarantee); ``k`` releases have ``k``
    times it."""
    from fedpriv.ledger import secret_radius_units

    radius = secret_radius_units(cfg.audit.threat_model, cell.batch_size)
    return release.log_bayes_capacity(dim, radius)


def _mean_se(values: Sequence[float]) -> tuple[float | None, float | None, int]:
    """Mean and standard error of the finite ``values`` (``None`` where undefined), and how
    many there were."""
    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if finite.size == 0:
        return None, None, 0
    se = float(finite.std(ddof=1) / math.sqrt(finite.size)) if finite.size > 1 else None
    return float(finite.mean()), se, int(finite.size)


def student_t_interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean of the finite ``values`` and the half-width of its 95% Student-t interval
    (``None`` with fewer than two values)."""
    from scipy.stats import t

    mean, se, n = _mean_se(values)
    return mean, (None if se is None else float(t.ppf(0.975, n - 1) * se))


def _flat_attack(attack: Mapping[str, Any]) -> dict[str, Any]:
    """A client's best attack with its priors' and its gains' SSIM and PSNR as columns
    (``prior_ssim``, ``gain_ssim``, ``no_update_prior_ssim``, …) and its identification score's
    ``log(M·P̂)``, lower end and bound; None where not scored."""
    parts = {part: attack.get(part) or {} for part in ("prior", "gain", "no_update_prior",
                                                       "no_update_gain")}
    found = attack.get("identification") or {}
    return {**attack, **{f"{part}_{k}": src.get(k) for part, src in parts.items()
                         for k in ("ssim", "psnr")},
            **{f"identification_{k}": found.get(k) for k in ("log_value", "log_lower",
                                                             "log_bound")}}


def _attack_scores(report: Mapping[str, Any]) -> dict[str, Any]:
    attacks = [_flat_attack(c["attack"]) for c in report.get("clients", []) if c.get("attack")]
    out: dict[str, Any] = {"attacked_updates": len(attacks)}
    for key in MEASURED[1:]:
        mean, se, _ = _mean_se([a.get(key) for a in attacks])
        out[key] = mean
        if key in ("mse", "ssim"):
            out[f"{key}_se"] = se
    return out


def _run_epsilon(report: Mapping[str, Any]) -> float | None:
    """The largest cumulative ε the run's auditor tallied for any client."""
    values = [c.get("epsilon") for c in report.get("clients", [])]
    numbers = [float(v) for v in values if v is not None]
    return max(numbers) if numbers else None


def _cell_part(cfg: Config, setting: SweepSetting, cell: Cell) -> dict[str, Any]:
    """The columns every run of ``cell`` shares."""
    release = cell.release(setting.dim, cfg.mechanism.params)  # as the cell's runs release
    one = update_log_capacity(cfg, cell, release, setting.dim)
    attacked = 1 if cfg.sweep.attack_on == "first-release" else setting.local_steps
    equivalent = (release.gaussian_equivalent(setting.dim)
                  if cell.parameter is not None else None)
    return {
        "cell": cell.key, "mechanism": cell.mechanism,
        "epsilon": cell.epsilon if cell.target_epsilon is None else cell.target_epsilon,
        "target_epsilon": cell.target_epsilon, "achieved_epsilon": cell.epsilon,
        "epsilon_per_epoch": cell.epsilon_per_epoch, "delta": setting.delta,
        "accountant": setting.accountant, "route": cell.route,
        "parameter_name": cell.parameter_name,
        **{k: cell.parameter if k == cell.parameter_name else None for k in PARAMETER_COLUMNS},
        "gaussian_equivalent_sigma": equivalent, "batch_size": cell.batch_size,
        "sample_rate": setting.sample_rate, "steps": setting.steps, "epochs": setting.epochs,
        "dim": setting.dim, "attack": cfg.sweep.attack,
        "attack_iterations": cfg.sweep.attack_iterations, "attack_on": cfg.sweep.attack_on,
        "log_capacity": attacked * one, "log_capacity_cumulative": setting.steps * one,
        "threat_model": cfg.audit.threat_model,
    }  # fmt: skip


def run_row(
    cfg: Config, setting: SweepSetting, cell: Cell, seed: int,
    train: tuple[Mapping[str, Any], Path], probe: tuple[Mapping[str, Any], Path] | None,
) -> dict[str, Any]:
    """The row of one seed's run of ``cell``: ``train`` is the training run's ``simulate``
    report and directory, ``probe`` the probe's (None when the training run was attacked)."""
    report, run_dir = train
    attacked = report if probe is None else probe[0]
    accuracy = report.get("accuracy") or []
    wall = [r.get("wall_seconds") or 0.0 for r in (report, attacked if probe else {})]
    row = {
        **_cell_part(cfg, setting, cell), "run_epsilon": _run_epsilon(report), "seed": seed,
        "accuracy": accuracy[-1] if accuracy else None, **_attack_scores(attacked),
        "run_dir": str(run_dir), "probe_dir": None if probe is None else str(probe[1]),
        "wall_seconds": sum(wall),
    }  # fmt: skip
    return {key: row.get(key) for key in RUN_KEYS}


def aggregate(cfg: Config, setting: SweepSetting, cell: Cell,
              runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The cell row: every measured quantity's mean over the seeds' ``runs`` and the
    half-width of its 95% Student-t interval."""
    row: dict[str, Any] = {**_cell_part(cfg, setting, cell), "seeds": len(runs)}
    tallied = [float(r["run_epsilon"]) for r in runs if r.get("run_epsilon") is not None]
    row["run_epsilon"] = max(tallied) if tallied else None
    for key in MEASURED:
        row[key], row[f"{key}_ci"] = student_t_interval(
            [math.nan if r.get(key) is None else float(r[key]) for r in runs])
    row["attacked_updates"] = sum(int(r.get("attacked_updates") or 0) for r in runs)
    row["wall_seconds"] = sum(float(r.get("wall_seconds") or 0.0) for r in runs)
    return {key: row.get(key) for key in ROW_KEYS}


def _csv_value(value: Any) -> Any:
    return "" if value is None else value


def write_csv(rows: Sequence[Mapping[str, Any]], path: Path,
              columns: Sequence[str] = ROW_KEYS) -> None:
    """Write ``rows`` to ``path`` (``columns``; empty cells for None), atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    atomic_write_bytes(path, buffer.getvalue().encode())
