"""Figures of ``fedpriv compare``: Bayes-error curves with Δ rulers, and Δ under composition.

Each curve is ``R_min(π)`` over the prior ``π``; perfect privacy ``min(π, 1 − π)`` is drawn for
reference. A ruler is the vertical segment, at the prior maximising ``Δ(X‖Y)``, between the two
curves: its length is ``Δ(X‖Y)`` (Kaissis et al., ICML 2025, §3). Line styles differ as well as
colours, so the figure reads in greyscale print. Rendered with matplotlib's Agg backend.

With ``--compose`` the figure is the exact Δ of ``A^{⊗n}`` and ``B^{⊗ñ}`` both ways against
``n`` (``ñ`` in the ratio the user gave), beside the Theorem 3 bound of Kaissis et al. (ICML
2025, §4) wherever its precondition holds, on log axes; a Δ of exactly 0 is not drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedpriv.leakage.bayes_error import TradeoffCurve

__all__ = ["Ruler", "plot_bayes_error_curves", "plot_composition"]


@dataclass(frozen=True)
class Ruler:
    """``Δ(upper‖lower)`` marked at prior ``prior``; ``label`` names it, e.g. ``Δ(A‖B)``."""

    label: str
    value: float
    prior: float


def _draw_ruler(ax: object, ruler: Ruler, low: float, high: float, text_height: float) -> None:
    """The segment ``[low, high]`` at ``ruler.prior``, labelled in the empty band below."""
    ax.annotate(  # type: ignore[attr-defined]
        "",
        xy=(ruler.prior, low),
        xytext=(ruler.prior, high),
        arrowprops={"arrowstyle": "|-|", "color": "black", "lw": 1.6, "shrinkA": 0, "shrinkB": 0},
        zorder=4,
    )
    ax.annotate(  # type: ignore[attr-defined]
        f"{ruler.label} = {ruler.value:.4f}  at π = {ruler.prior:.3f}",
        xy=(ruler.prior, low),
        xytext=(float(np.clip(ruler.prior, 0.3, 0.7)), text_height),
        fontsize=10,
        ha="center",
        arrowprops={"arrowstyle": "-", "color": "0.3", "lw": 0.8, "shrinkB": 2},
        bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.6"},
        zorder=5,
    )


def plot_bayes_error_curves(
    path: str | Path,
    curves: tuple[tuple[str, TradeoffCurve], tuple[str, TradeoffCurve]],
    rulers: tuple[Ruler, Ruler],
) -> None:
    """Write the figure to ``path`` (format from its suffix).

    Parameters
    ----------
    path
        Output file.
    curves
        ``((label_a, curve_a), (label_b, curve_b))``.
    rulers
        ``Δ(A‖B)`` and ``Δ(B‖A)`` with their maximising priors.
    """
    from matplotlib.figure import Figure  # no pyplot: the Agg canvas, no global state

    priors = np.linspace(0.0, 1.0, 1001)
    fig = Figure(figsize=(7.5, 5.0), dpi=150, layout="constrained")
    ax = fig.add_subplot()
    ax.plot(
        priors, np.minimum(priors, 1 - priors), ":", color="0.45", lw=1.4, label="perfect privacy"
    )
    styles = (("-", "#0b4f9c"), ("--", "#d55e00"))
    for (label, curve), (ls, colour) in zip(curves, styles, strict=True):
        ax.plot(priors, curve.bayes_error(priors), ls, color=colour, lw=2.2, label=label)
    (_, first), (_, second) = curves
    for ruler, (upper, lower), text_height in zip(
        rulers, ((first, second), (second, first)), (0.13, 0.05), strict=True
    ):
        high = float(upper.bayes_error(ruler.prior))
        low = float(lower.bayes_error(ruler.prior))
        _draw_ruler(ax, ruler, low, high, text_height)
    ax.set(xlim=(0, 1), ylim=(0, 0.55), xlabel="prior π (probability of the first hypothesis)")
    ax.set_ylabel("minimum Bayes error  R_min(π)")
    ax.set_title(f"Bayes error: {curves[0][0]}  vs  {curves[1][0]}", fontsize=12)
    ax.grid(True, color="0.9")
    ax.legend(loc="upper right", fontsize=10, framealpha=0.95)
    fig.savefig(Path(path))


def _positive(values: Sequence[float | None]) -> np.ndarray:
    """Values as floats, with None and values ≤ 0 as NaN (not drawn on a log axis)."""
    out = np.array([np.nan if v is None else float(v) for v in values])
    return np.where(out > 0, out, np.nan)


def plot_composition(
    path: str | Path, points: Sequence[dict[str, Any]], labels: tuple[str, str]
) -> None:
    """Write the exact composed Δ both ways and the Theorem 3 bounds against ``n``.

    Parameters
    ----------
    path
        Output file (format from its suffix).
    points
        Per count: ``n``, ``n_b``, ``delta_ab``, ``delta_ba`` and ``theorem3`` (as reported by
        :func:`fedpriv.commands.compare.compare_specs`).
    labels
        ``(label_a, label_b)``.
    """
    from matplotlib.figure import Figure

    n = np.array([p["n"] for p in points], dtype=float)
    fig = Figure(figsize=(7.5, 5.0), dpi=150, layout="constrained")
    ax = fig.add_subplot()
    styles = {"ab": ("-", "#0b4f9c", "Δ(A^n‖B^ñ)"), "ba": ("--", "#d55e00", "Δ(B^ñ‖A^n)")}
    for way, (ls, colour, name) in styles.items():
        ax.plot(n, _positive([p[f"delta_{way}"] for p in points]), ls, marker="o",
                color=colour, lw=2.0, label=f"exact {name}")  # fmt: skip
        bounds = [(p["theorem3"][way] or {}).get("bound") for p in points]
        if any(b is not None for b in bounds):
            ax.plot(n, _positive(bounds), ls, marker="^", color=colour, lw=1.2, alpha=0.7,
                    label=f"Theorem 3 bound on {name}")  # fmt: skip
    ax.axhline(0.5, color="0.45", ls=":", lw=1.2, label="½ (every Δ is below)")
    ax.annotate("Δ = 0 is not drawn (log axis)", xy=(0.99, 0.01), xycoords="axes fraction",
                ha="right", va="bottom", fontsize=8, color="0.35")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="n (releases of A; ñ = n·Ñ/N releases of B)")
    ax.set_ylim(top=1.0)
    ax.set_ylabel("Δ-divergence")
    ax.set_title(f"Composition: {labels[0]}  vs  {labels[1]}", fontsize=11)
    ax.grid(True, color="0.9", which="both")
    ax.legend(loc="best", fontsize=9, framealpha=0.95)
    fig.savefig(Path(path))
