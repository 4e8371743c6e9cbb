"""The run report's plots over rounds, as SVG: accuracy and loss, and any per-round
quantity per client (ε, log Bayes capacity, Bayesian privacy, attack SSIM).

Up to :data:`MAX_LINES` clients are drawn one line each
(:func:`~fedpriv.audit.plot_style.line_style`), labelled with their mechanism; clients of one
mechanism with identical values are drawn as one line with their count, and a client with no
value gets no legend entry. More clients are drawn as a band (range, quartiles, median) with
the worst client named. Every function returns None when the report holds nothing to draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedpriv.audit.plot_style import (
    OKABE_ITO,
    Figure,
    finish_rounds,
    id_list,
    line_style,
    new_figure,
    styled,
    svg_bytes,
)
from fedpriv.audit.series import Series, band, client_series, field_value
from fedpriv.audit.vacuity import ABP_MAX

__all__ = ["MAX_LINES", "bayes_figure", "per_client_figure", "utility_figure"]

#: Clients drawn one line each; more are drawn as a band.
MAX_LINES = 20
_STYLES = ("-", "--", ":", "-.")
Row = Mapping[str, Any]


def _groups(series: Series, mechanisms: Mapping[int, str]) -> list[tuple[list[int], np.ndarray]]:
    """Clients with some finite value, grouped where mechanism and values are identical."""
    groups: dict[tuple[str, bytes], tuple[list[int], np.ndarray]] = {}
    for cid, row in zip(series.client_ids, series.values, strict=True):
        if not np.isfinite(row).any():
            continue
        key = (mechanisms.get(cid, ""), np.nan_to_num(row, nan=-1.2345e300).tobytes())
        groups.setdefault(key, ([], row))[0].append(cid)
    return list(groups.values())


def _label(ids: list[int], mechanisms: Mapping[int, str]) -> str:
    mechanism = mechanisms.get(ids[0])
    name = id_list(ids, limit=4) + (f" ({mechanism})" if mechanism else "")
    return name + (f", {len(ids)} identical" if len(ids) > 1 else "")


def _lines(ax: Any, series: Series, mechanisms: Mapping[int, str]) -> None:
    for i, (ids, row) in enumerate(_groups(series, mechanisms)):
        ok = np.isfinite(row)
        ax.plot(series.rounds[ok], row[ok], label=_label(ids, mechanisms),
                linewidth=1.4 + 0.6 * (len(ids) > 1), **line_style(i))


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


def _mechanisms(clients: Sequence[Row]) -> dict[int, str]:
    return {int(c["client_id"]): c["mechanism"] for c in clients if c.get("mechanism")}


def _draw(ax: Any, series: Series, ylabel: str, log: bool | None = None,
          mechanisms: Mapping[int, str] | None = None) -> None:
    """Lines, or a band beyond :data:`MAX_LINES` clients, of a bounded series on ``ax``; a
    log y-axis when ``log``, or where it helps when ``log`` is None."""
    if len(series.client_ids) <= MAX_LINES:
        _lines(ax, series, mechanisms or {})
    else:
        _band(ax, series)
    finish_rounds(ax, series.rounds, series.values if log is None else np.array([]), ylabel)
    if log:
        ax.set_yscale("log")
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
    if len(unbounded) > 1 and len(unbounded) == len(series.client_ids):
        return f"∞ (not drawn) for all {len(unbounded)} clients."
    return f"∞ (not drawn) for {id_list(unbounded)}." if unbounded else ""


@styled
def utility_figure(report: Row) -> Figure | None:
    """Server-side accuracy and loss after each completed round."""
    rounds = np.asarray(report.get("completed_rounds") or [], dtype=np.float64)
    acc = np.array([field_value({"v": v}, "v") for v in report.get("accuracy") or []])
    loss = np.array([field_value({"v": v}, "v") for v in report.get("loss") or []])
    if not (np.isfinite(acc).any() or np.isfinite(loss).any()):
        return None
    fig, (ax_acc, ax_loss) = new_figure(1, 2, height=3.2, legend=False)
    for ax, values, label, colour, marker in (
        (ax_acc, acc, "accuracy", OKABE_ITO[0], "o"),
        (ax_loss, loss, "loss", OKABE_ITO[1], "s"),
    ):
        ok = np.isfinite(values)
        ax.plot(rounds[ok], values[ok], color=colour, marker=marker, markersize=4)
        finish_rounds(ax, rounds, np.array([]), f"test {label}")
    ax_acc.set_ylim(0.0, 1.0)
    ax_acc.set_title("Accuracy of the global model")
    ax_loss.set_title("Loss of the global model")
    return Figure("utility", "test accuracy and loss over rounds", svg_bytes(fig))


@styled
def per_client_figure(
    clients: Sequence[Row],
    key: str,
    ylabel: str,
    title: str,
    *,
    cumulative: bool,
    budgets: Sequence[float] = (),
    log: bool | None = None,
    unit_range: bool = False,
    reference: tuple[str, str] | None = None,
    ceiling: tuple[float, str] | None = None,
) -> Figure | None:
    """``key`` of every client over rounds (lines, or a band beyond :data:`MAX_LINES`);
    ``budgets`` are drawn as horizontal lines; ``log`` forces the y-scale (None: a log scale
    where it helps); ``unit_range`` shows a score such as SSIM on [0, 1] (lower if a value
    is negative), so that near 1 reads as near 1; ``reference = (key, label)`` draws that
    per-round field's mean over clients as a grey dashed line (an attack's prior baseline);
    ``ceiling = (value, label)`` draws the quantity's largest meaningful value (a bound above
    it is vacuous) as a dotted line."""
    series = client_series(clients, key, cumulative=cumulative)
    shown, note = series.bounded(), _unbounded_note(series)
    if not np.isfinite(shown.values).any():
        return Figure(key, title, None, f"{title}: {note}") if note else None
    fig, (ax,) = new_figure()
    for k, budget in enumerate(sorted(set(budgets))):
        ax.axhline(
            budget,
            color="#555555",
            linestyle=_STYLES[k % 4],
            linewidth=1.0,
            label=f"budget {budget:g}",
        )
    if reference is not None:
        _reference(ax, client_series(clients, reference[0]), reference[1])
    if ceiling is not None:
        ax.axhline(ceiling[0], color="#555555", linestyle=":", linewidth=1.0, label=ceiling[1])
    _draw(ax, shown, ylabel, log, _mechanisms(clients))
    if unit_range:
        finite = shown.values[np.isfinite(shown.values)]
        ax.set_ylim(min(0.0, float(finite.min())) - 0.02, 1.02)
    ax.set_title(title)
    return Figure(key, title, svg_bytes(fig), note)


def _reference(ax: Any, series: Series, label: str) -> None:
    """The mean over clients of ``series`` per round, as a grey dashed line."""
    with np.errstate(invalid="ignore"):
        counts = np.isfinite(series.values).sum(axis=0)
        mean = np.where(counts > 0, np.nansum(np.where(np.isfinite(series.values),
                                                       series.values, 0.0), axis=0)
                        / np.maximum(counts, 1), np.nan)
    ok = np.isfinite(mean)
    if ok.any():
        ax.plot(series.rounds[ok], mean[ok], color="#777777", linestyle="--", marker="_",
                linewidth=1.6, label=label)


def _within_abp_range(series: Series, label: str) -> tuple[Series, str]:
    """The series with ABP values above √log 2 (vacuous bounds; ∞ is handled apart) left
    undrawn, and a note naming those clients."""
    values = series.values.copy()
    beyond = np.isfinite(values) & (values > ABP_MAX)
    vacuous = [c for c, row in zip(series.client_ids, beyond, strict=True) if row.any()]
    values[beyond] = np.nan
    note = (f"{label}: vacuous (above √log 2 ≈ {ABP_MAX:.3f}, the largest ABP value; not "
            f"drawn) for {id_list(vacuous)}." if vacuous else "")
    return Series(series.client_ids, series.rounds, values), note


@styled
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
        if key.startswith("abp"):
            series, note = _within_abp_range(series, label)
            notes += [note] if note else []
        if np.isfinite(series.bounded().values).any():
            panels.append((series.bounded(), label))
    title = "Bayesian privacy bounds and estimates over rounds"
    if not panels:
        return Figure("bayesian-privacy", title, None, " ".join(notes)) if notes else None
    fig, axes = new_figure(len(panels), height=2.8)
    for ax, (series, label) in zip(axes, panels, strict=True):
        if label.startswith("ABP"):
            ax.axhline(ABP_MAX, color="#555555", linestyle=":", linewidth=1.0,
                       label="√log 2: largest ABP value")
        _draw(ax, series, label, mechanisms=_mechanisms(clients))
        ax.set_title(label)
    return Figure("bayesian-privacy", title, svg_bytes(fig), " ".join(notes))
