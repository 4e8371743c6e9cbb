"""The sweep's figures (matplotlib, Agg, no pyplot): PNGs sized and lettered for print.

* ``accuracy_vs_epsilon.png`` — final test accuracy against the target ε, per mechanism;
* ``reconstruction_vs_epsilon.png`` — attack MSE and SSIM against ε (± one standard error
  across attacked updates where there are several);
* ``mse_vs_log_capacity.png`` — MSE against the attacked update's log Bayes capacity, every
  mechanism on one axis (does capacity order reconstruction where ε does not?);
* ``log_capacity_vs_epsilon.png`` — log capacity against ε;
* ``reconstructions.png`` — the same true images and each cell's reconstruction of them.

ε axes are logarithmic (the targets span decades); so is the capacity axis when every value
is positive and they span more than a factor of ten.
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

__all__ = ["FIGURES", "STYLE", "number", "write_figures"]

FIGURES = (
    "accuracy_vs_epsilon.png", "reconstruction_vs_epsilon.png", "mse_vs_log_capacity.png",
    "log_capacity_vs_epsilon.png", "reconstructions.png",
)  # fmt: skip
STYLE = {  # mechanism -> (label, colour, marker); Okabe–Ito colours, for colour-blind readers
    "gaussian": ("Gaussian", "#0072B2", "o"),
    "vmf": ("VMF", "#D55E00", "s"),
    "laplace": ("Laplace", "#009E73", "^"),
}
_RC = {"font.size": 15, "axes.titlesize": 16, "axes.labelsize": 16, "legend.fontsize": 14,
       "xtick.labelsize": 14, "ytick.labelsize": 14, "lines.linewidth": 2.2,
       "lines.markersize": 9}
_LABEL_OFFSETS = ((7, 7), (7, -19), (-50, 7))  # points; keeps labels of mechanisms apart
Row = Mapping[str, Any]


def number(value: Any) -> float:
    """A row value as a float: None → NaN; the JSON strings "inf"/"nan" → inf/NaN."""
    return math.nan if value is None else float(value)


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


def _series(rows: Sequence[Row], mechanism: str, key: str) -> tuple[np.ndarray, ...]:
    mine = sorted((r for r in rows if r["mechanism"] == mechanism), key=lambda r: r["epsilon"])
    eps = np.array([number(r["epsilon"]) for r in mine])
    values = np.array([number(r.get(key)) for r in mine])
    se = np.array([number(r.get(f"{key}_se")) for r in mine])
    return eps, values, se


def _mechanisms(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(r["mechanism"] for r in rows))


def _plot_vs_epsilon(ax: Any, rows: Sequence[Row], key: str, ylabel: str) -> None:
    for mech in _mechanisms(rows):
        label, colour, marker = STYLE[mech]
        eps, values, se = _series(rows, mech, key)
        yerr = np.where(np.isfinite(se), se, 0.0) if np.isfinite(se).any() else None
        ax.errorbar(eps, values, yerr=yerr, color=colour, marker=marker, label=label,
                    capsize=4)
    _epsilon_axis(ax, rows)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def _epsilon_axis(ax: Any, rows: Sequence[Row]) -> None:
    """Log-scaled ε axis ticked at the targets themselves, labelled plainly (0.5, 1, 170)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.set_xticks(sorted({number(r["epsilon"]) for r in rows}))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"target ε at δ = {number(rows[0]['delta']):g} (log scale)")


def _accuracy(rows: Sequence[Row], path: Path, num_classes: int | None) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5.5))
    ax = fig.add_subplot()
    _plot_vs_epsilon(ax, rows, "accuracy", "test accuracy after the last round")
    if num_classes:
        ax.axhline(1.0 / num_classes, color="grey", linestyle="--", label="chance")
        ax.legend()
    ax.set_ylim(0.0, 1.0)
    ax.set_title("Utility at matched ε")
    return _save(fig, path)


def _reconstruction(rows: Sequence[Row], path: Path) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 5.5), layout="constrained")
    ax_mse, ax_ssim = fig.subplots(1, 2)
    _plot_vs_epsilon(ax_mse, rows, "mse", "reconstruction MSE (pixels in [0, 1])")
    _plot_vs_epsilon(ax_ssim, rows, "ssim", "reconstruction SSIM")
    _note_error_bars(ax_mse, rows)
    ax_mse.set_title("MSE: higher = better protected")
    ax_ssim.set_title("SSIM: lower = better protected")
    fig.suptitle(f"{rows[0]['attack'].upper()} on round-1 updates, "
                 f"{rows[0]['attack_iterations']} iterations", fontsize=16)
    return _save(fig, path)


def _note_error_bars(ax: Any, rows: Sequence[Row]) -> None:
    if any(math.isfinite(number(r.get("mse_se"))) for r in rows):
        ax.text(0.01, 0.01, "bars: ± 1 standard error over the attacked updates",
                transform=ax.transAxes, fontsize=11, color="dimgrey", va="bottom")


def _log_if_spread(ax: Any, values: np.ndarray, axis: str) -> None:
    """Log scale on ``axis`` ("x"/"y") when all values are positive and span > 10×."""
    finite = values[np.isfinite(values)]
    if finite.size and finite.min() > 0 and finite.max() / finite.min() > 10:
        getattr(ax, f"set_{axis}scale")("log")


def _mse_vs_capacity(rows: Sequence[Row], path: Path) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 6))
    ax = fig.add_subplot()
    for k, mech in enumerate(_mechanisms(rows)):
        label, colour, marker = STYLE[mech]
        mine = [r for r in rows if r["mechanism"] == mech]
        cap = np.array([number(r["log_capacity"]) for r in mine])
        mse = np.array([number(r["mse"]) for r in mine])
        se = np.array([number(r.get("mse_se")) for r in mine])
        ax.errorbar(cap, mse, yerr=np.where(np.isfinite(se), se, 0.0), fmt=marker,
                    color=colour, markersize=10, capsize=4, label=label, zorder=3)
        for r, x, y in zip(mine, cap, mse, strict=True):  # labels above, below, left by mechanism
            ax.annotate(f"ε={number(r['epsilon']):g}", (x, y), textcoords="offset points",
                        xytext=_LABEL_OFFSETS[k % 3], fontsize=12, color=colour)
    _log_if_spread(ax, np.array([number(r["log_capacity"]) for r in rows]), "x")
    ax.set_xlabel(f"log Bayes capacity of the attacked update (nats, {rows[0]['threat_model']}"
                  "-level)")
    ax.set_ylabel("reconstruction MSE (pixels in [0, 1])")
    ax.set_title("Does capacity order reconstruction across mechanisms?")
    _note_error_bars(ax, rows)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, path)


def _capacity_vs_epsilon(rows: Sequence[Row], path: Path) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5.5))
    ax = fig.add_subplot()
    _plot_vs_epsilon(ax, rows, "log_capacity",
                     f"log Bayes capacity per update (nats, {rows[0]['threat_model']}-level)")
    _log_if_spread(ax, np.array([number(r["log_capacity"]) for r in rows]), "y")
    ax.set_title("Reconstruction leakage bound at matched ε")
    return _save(fig, path)


def write_figures(
    rows: Sequence[Row],
    out_dir: Path,
    images: Mapping[str, Mapping[str, np.ndarray] | None],
    num_classes: int | None = None,
) -> list[str]:
    """Write every figure of :data:`FIGURES` into ``out_dir``; return their paths.

    Parameters
    ----------
    rows
        The result rows (:mod:`workflows.sweep.results`).
    images
        Cell key → example images (:func:`workflows.sweep.examples.example_images`) or None.
    num_classes
        Draws the chance level on the accuracy plot when given.
    """
    from workflows.sweep.grid import write_grid

    out_dir = Path(out_dir)
    with _style():
        return [
            _accuracy(rows, out_dir / FIGURES[0], num_classes),
            _reconstruction(rows, out_dir / FIGURES[1]),
            _mse_vs_capacity(rows, out_dir / FIGURES[2]),
            _capacity_vs_epsilon(rows, out_dir / FIGURES[3]),
            write_grid(rows, images, out_dir / FIGURES[4], _save),
        ]
