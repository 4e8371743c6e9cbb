"""The sweep's figures (matplotlib, Agg, no pyplot): PNGs sized and lettered for print.

* ``accuracy_vs_epsilon.png`` — final test accuracy against ε, per mechanism (and batch size);
* ``reconstruction_vs_epsilon.png`` — attack MSE and SSIM against ε;
* ``mse_vs_log_capacity.png`` — MSE against the attacked release's log Bayes capacity, every
  mechanism on one axis (does capacity order reconstruction where ε does not?);
* ``log_capacity_vs_epsilon.png`` — log capacity against ε;
* ``reconstructions.png`` — the same true images and each cell's reconstruction of them;
* ``batch_size_study.png`` — only when several batch sizes are swept: accuracy, MSE and SSIM
  against the batch size, one line per mechanism and noise parameter.

Every point is the mean over seeds with its 95% Student-t interval as an error bar (none with
one seed). ε is a cell's target when it was calibrated, else its per-step ε; ε axes are
logarithmic (the values span decades), as is the capacity axis when every value is positive
and they span more than a factor of ten. Mechanisms without a guarantee (ε = ∞) are drawn as
horizontal reference lines.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from fedpriv.atomic import atomic_write_bytes
from workflows.sweep.grid import write_grid
from workflows.sweep.rows import Row, number, series
from workflows.sweep.style import label, style

__all__ = ["BATCH_FIGURE", "FIGURES", "line_name", "write_accuracy_figure", "write_figures"]

FIGURES = (
    "accuracy_vs_epsilon.png", "reconstruction_vs_epsilon.png", "mse_vs_log_capacity.png",
    "log_capacity_vs_epsilon.png", "reconstructions.png",
)  # fmt: skip
BATCH_FIGURE = "batch_size_study.png"
_RC = {"font.size": 15, "axes.titlesize": 16, "axes.labelsize": 16, "legend.fontsize": 13,
       "xtick.labelsize": 14, "ytick.labelsize": 14, "lines.linewidth": 2.2,
       "lines.markersize": 9}
_LABEL_OFFSETS = ((7, 7), (7, -19), (-50, 7))  # points; keeps labels of mechanisms apart
_DASHES = ("-", "--", ":", "-.")


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(_RC):
        yield


def _save(fig: Any, path: Path) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight", pad_inches=0.15)
    atomic_write_bytes(path, buffer.getvalue())
    return str(path)


def _batch_sizes(rows: Sequence[Row]) -> list[int]:
    return sorted({int(r["batch_size"]) for r in rows})


def _line_label(rows: Sequence[Row], mechanism: str, batch: int) -> str:
    name = label(mechanism)
    return f"{name}, L = {batch}" if len(_batch_sizes(rows)) > 1 else name


def _dash(rows: Sequence[Row], batch: int) -> str:
    return _DASHES[_batch_sizes(rows).index(batch) % len(_DASHES)]


def _points(rows: Sequence[Row], mechanism: str, batch: int, key: str) -> tuple[np.ndarray, ...]:
    mine = sorted((r for r in rows if (r["mechanism"], r["batch_size"]) == (mechanism, batch)
                   and r.get("parameter_name") is not None), key=lambda r: number(r["epsilon"]))
    eps = np.array([number(r["epsilon"]) for r in mine])
    values = np.array([number(r.get(key)) for r in mine])
    ci = np.array([number(r.get(f"{key}_ci")) for r in mine])
    return eps, values, ci


def _error(ci: np.ndarray) -> np.ndarray | None:
    return np.where(np.isfinite(ci), ci, 0.0) if np.isfinite(ci).any() else None


def _references(ax: Any, rows: Sequence[Row], key: str) -> None:
    """Cells without a guarantee as horizontal lines (mean over seeds)."""
    for r in rows:
        if r.get("parameter_name") is None and math.isfinite(number(r.get(key))):
            _, colour, _ = style(r["mechanism"])
            ax.axhline(number(r[key]), color=colour, linestyle=_dash(rows, r["batch_size"]),
                       linewidth=1.6, label=_line_label(rows, r["mechanism"], r["batch_size"]))


def _plot_vs_epsilon(ax: Any, rows: Sequence[Row], key: str, ylabel: str) -> None:
    for mech, batch in series(rows):
        _, colour, marker = style(mech)
        eps, values, ci = _points(rows, mech, batch, key)
        ax.errorbar(eps, values, yerr=_error(ci), color=colour, marker=marker, capsize=4,
                    linestyle=_dash(rows, batch), label=_line_label(rows, mech, batch))
    _references(ax, rows, key)
    _epsilon_axis(ax, rows)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def _epsilon_axis(ax: Any, rows: Sequence[Row]) -> None:
    """Log-scaled ε axis labelled plainly (0.5, 1, 170)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    calibrated = all(r.get("target_epsilon") is not None for r in rows
                     if r.get("parameter_name") is not None)
    what = "target ε" if calibrated else "ε per step (the target where calibrated)"
    ax.set_xlabel(f"{what}, δ = {number(rows[0]['delta']):g}")


def _interval_note(ax: Any, rows: Sequence[Row], key: str) -> None:
    if any(math.isfinite(number(r.get(f"{key}_ci"))) for r in rows):
        seeds = max(int(r["seeds"]) for r in rows)
        ax.text(0.01, 0.01, f"bars: 95% Student-t interval over {seeds} seeds",
                transform=ax.transAxes, fontsize=11, color="dimgrey", va="bottom")


def _accuracy(rows: Sequence[Row], path: Path, num_classes: int | None) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 6))
    ax = fig.add_subplot()
    _plot_vs_epsilon(ax, rows, "accuracy", "test accuracy after the last round")
    if num_classes:
        ax.axhline(1.0 / num_classes, color="grey", linestyle=(0, (1, 3)), label="chance")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the points, never on them
    ax.set_ylim(0.0, 1.0)
    _interval_note(ax, rows, "accuracy")
    ax.set_title("Utility")
    return _save(fig, path)


def _reconstruction(rows: Sequence[Row], path: Path) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(16, 6), layout="constrained")
    ax_mse, ax_ssim = fig.subplots(1, 2)
    _plot_vs_epsilon(ax_mse, rows, "mse", "reconstruction MSE (pixels in [0, 1])")
    _plot_vs_epsilon(ax_ssim, rows, "ssim", "reconstruction SSIM")
    _interval_note(ax_mse, rows, "mse")
    ax_mse.set_title("MSE: higher = better protected")
    ax_ssim.set_title("SSIM: lower = better protected")
    what = ("first noisy release of training" if rows[0]["attack_on"] == "first-release"
            else "round-1 updates")
    fig.suptitle(f"{rows[0]['attack'].upper()} on the {what}, "
                 f"{rows[0]['attack_iterations']} iterations", fontsize=16)
    return _save(fig, path)


def _log_if_spread(ax: Any, values: np.ndarray, axis: str) -> None:
    """Log scale on ``axis`` ("x"/"y") when all values are positive and span > 10×."""
    finite = values[np.isfinite(values)]
    if finite.size and finite.min() > 0 and finite.max() / finite.min() > 10:
        getattr(ax, f"set_{axis}scale")("log")


def _mse_vs_capacity(rows: Sequence[Row], path: Path) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 6.5))
    ax = fig.add_subplot()
    for k, (mech, batch) in enumerate(series(rows)):
        _, colour, marker = style(mech)
        mine = [r for r in rows if (r["mechanism"], r["batch_size"]) == (mech, batch)
                and r.get("parameter_name") is not None]
        cap = np.array([number(r["log_capacity"]) for r in mine])
        mse = np.array([number(r["mse"]) for r in mine])
        ci = np.array([number(r.get("mse_ci")) for r in mine])
        ax.errorbar(cap, mse, yerr=_error(ci), fmt=marker, color=colour, markersize=10,
                    capsize=4, label=_line_label(rows, mech, batch), zorder=3)
        for r, x, y in zip(mine, cap, mse, strict=True):  # labels above, below, left by series
            ax.annotate(f"ε={number(r['epsilon']):.3g}", (x, y), textcoords="offset points",
                        xytext=_LABEL_OFFSETS[k % 3], fontsize=11, color=colour)
    _references(ax, rows, "mse")
    _log_if_spread(ax, np.array([number(r["log_capacity"]) for r in rows]), "x")
    ax.set_xlabel(f"log Bayes capacity of the attacked release(s) (nats, "
                  f"{rows[0]['threat_model']}-level)")
    ax.set_ylabel("reconstruction MSE (pixels in [0, 1])")
    ax.set_title("Does capacity order reconstruction across mechanisms?")
    _interval_note(ax, rows, "mse")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, path)


def _capacity_vs_epsilon(rows: Sequence[Row], path: Path) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 6))
    ax = fig.add_subplot()
    guaranteed = [r for r in rows if r.get("parameter_name") is not None]
    _plot_vs_epsilon(ax, guaranteed, "log_capacity",
                     f"log Bayes capacity, attacked release(s) (nats, "
                     f"{rows[0]['threat_model']}-level)")
    _log_if_spread(ax, np.array([number(r["log_capacity"]) for r in guaranteed]), "y")
    ax.set_title("Reconstruction leakage bound")
    return _save(fig, path)


_SYMBOLS = {"noise_multiplier": "σ", "kappa": "κ", "laplace_scale": "b"}


def line_name(name: str | None, value: Any, target: Any) -> str:
    """A batch-figure line's own label: ``σ 1.23``, ``κ 75``, ``ε 5`` (calibrated to a target
    ε), or ``""`` for a baseline (its colour says which)."""
    if target is not None:
        return f"ε {number(target):g}"
    if name is None:
        return ""
    return f"{_SYMBOLS.get(name, name)} {number(value):g}"


def _name_line_ends(ax: Any, ends: list[tuple[float, int, str, str]]) -> None:
    """Name each line right of its last point, nudged apart so that no two names overlap
    (at least 3% of the panel's height between neighbours)."""
    if not ends:
        return
    low, high = ax.get_ylim()
    gap = 0.03 * (high - low)
    placed: list[float] = []
    for y, x, text, colour in sorted(ends):
        at = y if not placed else max(y, placed[-1] + gap)
        placed.append(at)
        ax.annotate(text, (x, y), xytext=(x * 1.08, at), textcoords="data", color=colour,
                    va="center", fontsize=9)


def _batch_study(rows: Sequence[Row], path: Path) -> str:
    """Accuracy, MSE and SSIM against the batch size, one line per (mechanism, parameter)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(18, 6), layout="constrained")
    axes = fig.subplots(1, 3)
    lines = dict.fromkeys((r["mechanism"], r.get("parameter_name"),
                           r.get(r["parameter_name"]) if r.get("parameter_name") else None,
                           r.get("target_epsilon")) for r in rows)
    for ax, key, title in zip(axes, ("accuracy", "mse", "ssim"),
                              ("test accuracy", "reconstruction MSE", "reconstruction SSIM"),
                              strict=True):
        shown: set[str] = set()
        ends: list[tuple[float, int, str, str]] = []  # (y, x, name, colour) of each line's end
        for mech, name, value, target in lines:
            mine = sorted((r for r in rows if (r["mechanism"], r.get("parameter_name"),
                                                r.get(name) if name else None,
                                                r.get("target_epsilon"))
                           == (mech, name, value, target)), key=lambda r: r["batch_size"])
            text, colour, marker = style(mech)
            xs, ys = [r["batch_size"] for r in mine], [number(r[key]) for r in mine]
            ax.errorbar(xs, ys, yerr=_error(np.array([number(r.get(f"{key}_ci")) for r in mine])),
                        color=colour, marker=marker or "x", capsize=3, alpha=0.75,
                        label=None if text in shown else text)
            shown.add(text)
            if key == "accuracy" and mine and math.isfinite(ys[-1]):
                ends.append((ys[-1], xs[-1], line_name(name, value, target), colour))
        _name_line_ends(ax, ends)
        ax.set_xscale("log", base=2)
        sizes = _batch_sizes(rows)
        ax.set_xlim(sizes[0] / 1.2, sizes[-1] * (1.7 if key == "accuracy" else 1.2))
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.set_xlabel("batch size L (log scale)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    _interval_note(axes[1], rows, "mse")
    fig.suptitle("Batch size: one line per mechanism and noise parameter (named in the first "
                 "panel)", fontsize=16)
    return _save(fig, path)


def write_accuracy_figure(rows: Sequence[Row], out_dir: Path,
                          num_classes: int | None = None) -> str:
    """Write :data:`FIGURES`' first, accuracy against ε, into ``out_dir``; return its path
    (what a re-accounted study redraws: ``benchmarks/study_epsilon.py``)."""
    with _style():
        return _accuracy(rows, Path(out_dir) / FIGURES[0], num_classes)


def write_figures(
    rows: Sequence[Row],
    out_dir: Path,
    images: Mapping[str, Mapping[str, np.ndarray] | None],
    num_classes: int | None = None,
) -> list[str]:
    """Write every figure of :data:`FIGURES` (and :data:`BATCH_FIGURE` with several batch
    sizes) into ``out_dir``; return their paths.

    Parameters
    ----------
    rows
        The cell rows (:mod:`workflows.sweep.results`).
    images
        Cell key → example images (:func:`workflows.sweep.examples.example_images`) or None.
    num_classes
        Draws the chance level on the accuracy plot when given.
    """
    out_dir = Path(out_dir)
    paths = [write_accuracy_figure(rows, out_dir, num_classes)]
    with _style():
        paths += [
            _reconstruction(rows, out_dir / FIGURES[1]),
            _mse_vs_capacity(rows, out_dir / FIGURES[2]),
            _capacity_vs_epsilon(rows, out_dir / FIGURES[3]),
            write_grid(rows, images, out_dir / FIGURES[4], _save),
        ]
        if len(_batch_sizes(rows)) > 1:
            paths.append(_batch_study(rows, out_dir / BATCH_FIGURE))
    return paths
