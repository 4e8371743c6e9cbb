"""The run report's plots over rounds, as SVG (matplotlib, Agg, no pyplot state).

Readable in grey and by colour-blind readers: the Okabe–Ito palette (its yellow left out, too
pale on white) with a distinct line style and marker per client; more than
:data:`MAX_LINES` clients are drawn as a band (range, quartiles, median) with the worst client
named. Every function returns None when the report holds nothing to draw.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import numpy as np

from fedpriv.audit.series import (
    Series,
    band,
    client_series,
    field_value,
    log_scale_helps,
    status_counts,
)

__all__ = [
    "MAX_LINES",
    "OKABE_ITO",
    "Figure",
    "bayes_figure",
    "epsilon_bounds_figure",
    "line_style",
    "per_client_figure",
    "utility_figure",
    "verification_figure",
]

#: Clients drawn one line each; more are drawn as a band.
MAX_LINES = 20
#: Okabe & Ito (2008), "Color universal design", without the yellow #F0E442.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_STATUS_COLOURS = {"consistent": "#009E73", "inconsistent": "#D55E00", "unverifiable": "#999999"}
_HATCHES = {"consistent": "", "inconsistent": "xx", "unverifiable": ".."}
_RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "legend.fontsize": 8,
    "svg.fonttype": "path",
    "svg.hashsalt": "fedpriv",
    "axes.grid": True,
    "grid.alpha": 0.3,
}
Row = Mapping[str, Any]
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
    """Colour, line style and marker of the ``i``-th line; unique for the first 28."""
    k = len(OKABE_ITO)
    return {
        "color": OKABE_ITO[i % k],
        "linestyle": _STYLES[(i // k) % len(_STYLES)],
        "marker": _MARKERS[(i + i // k) % len(_MARKERS)],
        "markersize": 4,
    }


def _figure(
    rows: int = 1, cols: int = 1, *, height: float = 3.4, legend: bool = True
) -> tuple[Any, list[Any]]:
    """A 9-inch-wide figure of ``rows × cols`` axes ``height`` inches tall each, with fixed
    margins (room on the right for a legend): a layout engine would double the drawing time."""
    from matplotlib.figure import Figure as MplFigure

    width, total = 9.0, height * rows
    fig = MplFigure(figsize=(width, total))
    fig.subplots_adjust(
        left=0.8 / width, right=1 - (1.9 if legend else 0.25) / width,
        bottom=0.55 / total, top=1 - 0.35 / total, hspace=0.9 / height, wspace=0.3,
    )  # fmt: skip
    return fig, list(fig.subplots(rows, cols, squeeze=False).ravel())


def _styled(draw: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run ``draw`` under the report's matplotlib settings (rcParams apply when artists are
    made, not only when saved); the global settings are left as they were."""

    @functools.wraps(draw)
    def styled(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        import matplotlib

        with matplotlib.rc_context(_RC):
            return draw(*args, **kwargs)

    return styled


def _svg(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def _finish(ax: Any, rounds: np.ndarray, values: np.ndarray, ylabel: str) -> None:
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


def _lines(ax: Any, series: Series) -> None:
    for i, (cid, row) in enumerate(zip(series.client_ids, series.values, strict=True)):
        ok = np.isfinite(row)
        ax.plot(series.rounds[ok], row[ok], label=f"client {cid}", linewidth=1.4, **line_style(i))


def _band(ax: Any, series: Series) -> None:
    b = band(series)
    n = len(series.client_ids)
    ax.fill_between(
        b.rounds,
        b.low,
        b.high,
        color="#BBBBBB",
        alpha=0.5,
        linewidth=0,
        label=f"range of {n} clients",
    )
    ax.fill_between(
        b.rounds, b.q25, b.q75, color="#56B4E9", alpha=0.6, linewidth=0, label="quartiles"
    )
    ax.plot(b.rounds, b.median, color="#0072B2", linewidth=1.8, label="median")
    if b.worst_id is not None:
        ok = np.isfinite(b.worst)
        ax.plot(
            b.rounds[ok],
            b.worst[ok],
            color="#000000",
            linestyle="--",
            marker="X",
            markersize=4,
            linewidth=1.4,
            label=f"worst: client {b.worst_id}",
        )


def _draw(ax: Any, series: Series, ylabel: str) -> None:
    """Lines, or a band beyond :data:`MAX_LINES` clients, of a bounded series on ``ax``."""
    if len(series.client_ids) <= MAX_LINES:
        _lines(ax, series)
    else:
        _band(ax, series)
    _finish(ax, series.rounds, series.values, ylabel)
    entries = len(ax.get_legend_handles_labels()[1])
    if entries:
        ax.legend(
            loc="center left",
            bbox_to_anchor=(1.01, 0.5),
            frameon=False,
            ncol=2 if entries > 12 else 1,
        )


def _unbounded_note(series: Series) -> str:
    unbounded = sorted(series.unbounded())
    return f"∞ (not drawn) for {_id_list(unbounded)}." if unbounded else ""


def _id_list(ids: Sequence[int], limit: int = 12) -> str:
    shown = ", ".join(map(str, ids[:limit]))
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"client{'s' if len(ids) > 1 else ''} {shown}{more}"


@_styled
def utility_figure(report: Row) -> Figure | None:
    """Server-side accuracy and loss after each completed round."""
    rounds = np.asarray(report.get("completed_rounds") or [], dtype=np.float64)
    acc = np.array([field_value({"v": v}, "v") for v in report.get("accuracy") or []])
    loss = np.array([field_value({"v": v}, "v") for v in report.get("loss") or []])
    if not (np.isfinite(acc).any() or np.isfinite(loss).any()):
        return None
    fig, (ax_acc, ax_loss) = _figure(1, 2, height=3.2, legend=False)
    for ax, values, label, colour, marker in (
        (ax_acc, acc, "accuracy", OKABE_ITO[0], "o"),
        (ax_loss, loss, "loss", OKABE_ITO[1], "s"),
    ):
        ok = np.isfinite(values)
        ax.plot(rounds[ok], values[ok], color=colour, marker=marker, markersize=4)
        _finish(ax, rounds, np.array([]), f"test {label}")
    ax_acc.set_ylim(0.0, 1.0)
    ax_acc.set_title("Accuracy of the global model")
    ax_loss.set_title("Loss of the global model")
    return Figure("utility", "test accuracy and loss over rounds", _svg(fig))


@_styled
def per_client_figure(
    clients: Sequence[Row],
    key: str,
    ylabel: str,
    title: str,
    *,
    cumulative: bool,
    budgets: Sequence[float] = (),
) -> Figure | None:
    """``key`` of every client over rounds (lines, or a band beyond :data:`MAX_LINES`);
    ``budgets`` are drawn as horizontal lines."""
    series = client_series(clients, key, cumulative=cumulative)
    shown, note = series.bounded(), _unbounded_note(series)
    if not np.isfinite(shown.values).any():
        return Figure(key, title, None, f"{title}: {note}") if note else None
    fig, (ax,) = _figure()
    for k, budget in enumerate(sorted(set(budgets))):
        ax.axhline(
            budget,
            color="#555555",
            linestyle=_STYLES[k % 4],
            linewidth=1.0,
            label=f"budget {budget:g}",
        )
    _draw(ax, shown, ylabel)
    ax.set_title(title)
    return Figure(key, title, _svg(fig), note)


@_styled
def epsilon_bounds_figure(clients: Sequence[Row]) -> Figure | None:
    """Per client, the accountant's ε (an upper bound) against the audit's lower bound
    ``epsilon_lower``, clients in the order given (worst first); None without lower bounds."""
    upper = np.array([field_value(c, "epsilon") for c in clients])
    lower = np.array([field_value(c, "epsilon_lower") for c in clients])
    if not np.isfinite(lower).any():
        return None
    x = np.arange(len(clients))
    fig, (ax,) = _figure()
    finite_upper = np.isfinite(upper)
    ax.vlines(
        x[finite_upper], lower[finite_upper], upper[finite_upper], color="#999999", linewidth=1.0
    )
    ax.plot(
        x,
        upper,
        linestyle="none",
        marker="v",
        color=OKABE_ITO[1],
        markersize=5,
        label="ε upper bound (accountant)",
    )
    ax.plot(
        x,
        lower,
        linestyle="none",
        marker="^",
        color=OKABE_ITO[0],
        markersize=5,
        label="ε lower bound (audit)",
    )
    crossed = np.isfinite(lower) & (lower > upper)
    if crossed.any():
        ax.plot(
            x[crossed],
            lower[crossed],
            linestyle="none",
            marker="o",
            markersize=10,
            markerfacecolor="none",
            color="#000000",
            label="lower > upper",
        )
    ids = [int(c["client_id"]) for c in clients]
    if len(ids) <= 40:
        ax.set_xticks(x, [str(i) for i in ids])
        ax.set_xlabel("client (worst first)")
    else:
        ax.set_xlabel(f"client rank, worst first ({len(ids)} clients)")
    ax.set_ylabel("ε at δ")
    if log_scale_helps(np.concatenate([upper, lower])):
        ax.set_yscale("log")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title("ε: accountant's upper bound against the audit's lower bound")
    unbounded = [i for i, u in zip(ids, upper, strict=True) if np.isposinf(u)]
    note = "" if not unbounded else f"Upper bound ∞ (not drawn): {_id_list(unbounded)}."
    return Figure("epsilon-bounds", "epsilon upper and lower bounds per client", _svg(fig), note)


@_styled
def bayes_figure(clients: Sequence[Row]) -> Figure | None:
    """Bayesian privacy per client over rounds: MBP and ABP, bounds and estimates, one panel
    each where some value is finite."""
    panels, notes = [], []
    for key, label, cumulative in (
        ("mbp_bound", "MBP bound ξ", True), ("mbp_estimate", "MBP estimate ξ̂", False),
        ("abp_bound", "ABP bound", True), ("abp_estimate", "ABP estimate", False),
    ):  # fmt: skip
        series = client_series(clients, key, cumulative=cumulative)
        note = _unbounded_note(series)
        notes += [f"{label}: {note}"] if note else []
        if np.isfinite(series.bounded().values).any():
            panels.append((series.bounded(), label))
    title = "Bayesian privacy bounds and estimates over rounds"
    if not panels:
        return Figure("bayesian-privacy", title, None, " ".join(notes)) if notes else None
    fig, axes = _figure(len(panels), height=2.8)
    for ax, (series, label) in zip(axes, panels, strict=True):
        _draw(ax, series, label)
        ax.set_title(label)
    return Figure("bayesian-privacy", title, _svg(fig), " ".join(notes))


@_styled
def verification_figure(clients: Sequence[Row]) -> Figure | None:
    """Per round, how many replies the server found consistent with their declaration."""
    rounds, counts = status_counts(clients)
    if not counts:
        return None
    fig, (ax,) = _figure(height=3.0)
    bottom = np.zeros(len(rounds))
    for status in sorted(counts, key=lambda s: (s not in _STATUS_COLOURS, s)):
        ax.bar(
            rounds,
            counts[status],
            bottom=bottom,
            label=status,
            edgecolor="#000000",
            color=_STATUS_COLOURS.get(status, "#CC79A7"),
            hatch=_HATCHES.get(status, "//"),
            linewidth=0.5,
        )
        bottom += counts[status]
    _finish(ax, rounds, np.array([]), "replies")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title("Declared mechanism checked against each update")
    return Figure("verification", "verification status per round", _svg(fig))
