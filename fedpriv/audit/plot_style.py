"""How the run report draws: matplotlib settings, the colour-blind-safe line styles, the
figure record, SVG output (matplotlib, Agg, no pyplot state).

The Okabe–Ito palette (its yellow left out, too pale on white) with a distinct line style
and marker per line, so lines stay apart in grey and for colour-blind readers.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import numpy as np

from fedpriv.audit.series import log_scale_helps

__all__ = [
    "OKABE_ITO", "Figure", "finish_rounds", "id_list", "line_style", "new_figure", "styled",
    "svg_bytes",
]  # fmt: skip

#: Okabe & Ito (2008), "Color universal design", without the yellow #F0E442.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_RC = {
    "font.size": 10, "axes.titlesize": 11, "legend.fontsize": 8, "svg.fonttype": "path",
    "svg.hashsalt": "fedpriv", "axes.grid": True, "grid.alpha": 0.3,
}  # fmt: skip
_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(frozen=True)
class Figure:
    """One embedded figure: its anchor name, alt text, SVG bytes and a note to print
    under it (e.g. the clients left out for an infinite value). ``svg`` is None when every
    value was infinite: the note alone says so."""

    name: str
    alt: str
    svg: bytes | None
    note: str = ""


def line_style(i: int) -> dict[str, Any]:
    """Colour, line style and marker of the ``i``-th line; the first 28 differ in line
    style and marker alone (readable in grey)."""
    k = len(OKABE_ITO)
    return {
        "color": OKABE_ITO[i % k],
        "linestyle": _STYLES[(i // k) % len(_STYLES)],
        "marker": _MARKERS[(i + i // k) % len(_MARKERS)],
        "markersize": 4,
    }


def new_figure(
    rows: int = 1, cols: int = 1, *, height: float = 3.4, legend: bool = True
) -> tuple[Any, list[Any]]:
    """A 9-inch-wide figure of ``rows × cols`` axes ``height`` inches tall each, with fixed
    margins (room on the right for a legend): a layout engine would double the drawing time."""
    from matplotlib.figure import Figure as MplFigure

    width, total = 9.0, height * rows
    fig = MplFigure(figsize=(width, total))
    fig.subplots_adjust(
        left=1.0 / width, right=1 - (2.1 if legend else 0.25) / width,
        bottom=0.55 / total, top=1 - 0.35 / total, hspace=0.9 / height, wspace=0.3,
    )  # fmt: skip
    return fig, list(fig.subplots(rows, cols, squeeze=False).ravel())


def styled(draw: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run ``draw`` under the report's matplotlib settings (rcParams apply when artists are
    made, not only when saved); the global settings are left as they were."""

    @functools.wraps(draw)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        import matplotlib

        with matplotlib.rc_context(_RC):
            return draw(*args, **kwargs)

    return run


def svg_bytes(fig: Any) -> bytes:
    """The figure as SVG (glyphs as paths: no font needed; no date: same input, same bytes),
    cropped to what is drawn: a legend beside the axes wider than the margin is kept whole."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight",
                pad_inches=0.05)
    return buffer.getvalue()


def finish_rounds(ax: Any, rounds: np.ndarray, values: np.ndarray, ylabel: str) -> None:
    """Round axis (every round ticked when there are few), labels, log y-axis where it helps."""
    from matplotlib.ticker import MaxNLocator

    rounds = np.asarray(rounds, dtype=np.float64)
    if 0 < len(rounds) <= 12:
        ax.set_xticks(rounds)
        ax.set_xlim(rounds.min() - 0.5, rounds.max() + 0.5)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    if log_scale_helps(values):
        ax.set_yscale("log")


def id_list(ids: Sequence[int], limit: int = 12) -> str:
    """``"clients 1, 4 and 3 more"``: at most ``limit`` ids named."""
    shown = ", ".join(map(str, ids[:limit]))
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"client{'s' if len(ids) > 1 else ''} {shown}{more}"
