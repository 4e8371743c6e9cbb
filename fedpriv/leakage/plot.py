"""Figure of two mechanisms' Bayes-error curves with the Δ-divergence "rulers" marked.

Each curve is ``R_min(π)`` over the prior ``π``; perfect privacy ``min(π, 1 − π)`` is drawn for
reference. A ruler is the vertical segment, at the prior maximising ``Δ(X‖Y)``, between the two
curves: its length is ``Δ(X‖Y)`` (Kaissis et al., ICML 2025, §3). Line styles differ as well as
colours, so the figure reads in greyscale print. Rendered with matplotlib's Agg backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedpriv.leakage.bayes_error import TradeoffCurve

__all__ = ["Ruler", "plot_bayes_error_curves"]


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
