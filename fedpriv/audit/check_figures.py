"""The run report's figures of the audit's own checks, as SVG: the accountant's ε against
an audited lower bound per client, and per round how many updates matched their declared
mechanism. Both return None when the report carries no such field.
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
    new_figure,
    styled,
    svg_bytes,
)
from fedpriv.audit.series import field_value, log_scale_helps, status_counts

__all__ = ["NOT_VERIFIED", "epsilon_bounds_figure", "shown_status", "verification_figure"]

#: Clients drawn with a marker per bound; more are drawn as two traced lines.
MAX_MARKED = 40
#: A consistent reply of a client-round whose guarantee is not ``verified`` (some ε-relevant
#: property untested, docs/trust.md): not drawn in the green of a verified one.
NOT_VERIFIED = "consistent, not verified"
_STATUS_COLOURS = {"consistent": "#009E73", NOT_VERIFIED: "#56B4E9", "inconsistent": "#D55E00",
                   "unverifiable": "#999999", "undeclared": "#E69F00"}
_HATCHES = {"consistent": "", NOT_VERIFIED: "//", "inconsistent": "xx", "unverifiable": "..",
            "undeclared": "\\\\"}
_LABELS = {"consistent": "consistent, verified"}
Row = Mapping[str, Any]


def _bounds_marked(ax: Any, x: np.ndarray, upper: np.ndarray, lower: np.ndarray) -> None:
    """A few clients: a marker per bound, joined by a grey bar."""
    ok = np.isfinite(upper) & np.isfinite(lower)
    ax.vlines(x[ok], lower[ok], upper[ok], color="#999999", linewidth=1.0)
    for values, marker, colour, label in (
        (upper, "v", OKABE_ITO[1], "upper (accountant)"),
        (lower, "^", OKABE_ITO[0], "lower (audit)"),
    ):  # fmt: skip
        ax.plot(x, values, linestyle="none", marker=marker, color=colour, markersize=5,
                label=label)  # fmt: skip


def _bounds_traced(ax: Any, x: np.ndarray, upper: np.ndarray, lower: np.ndarray) -> None:
    """Many clients: each bound as one line over the clients' ranks, the gap shaded."""
    ax.fill_between(x, lower, upper, color="#BBBBBB", alpha=0.5, linewidth=0, label="gap")
    ax.plot(x, upper, color=OKABE_ITO[1], linewidth=1.4, label="upper (accountant)")
    ax.plot(x, lower, color=OKABE_ITO[0], linewidth=1.4, linestyle="--",
            label="lower (audit)")  # fmt: skip


def _upper(client: Row) -> float:
    """The accountant's ε that the client's lower bound bounds: ``epsilon_lower``'s own
    ``epsilon_formal`` where it names one (a canary's ε), else the client's ``epsilon``."""
    formal = field_value(client.get("epsilon_lower"), "epsilon_formal")
    return formal if not np.isnan(formal) else field_value(client, "epsilon")


@styled
def epsilon_bounds_figure(clients: Sequence[Row]) -> Figure | None:
    """Per client, the accountant's ε (an upper bound) against the audit's lower bound
    ``epsilon_lower``, clients in the order given (worst first), a crossing circled; None
    without lower bounds."""
    upper = np.array([_upper(c) for c in clients])
    lower = np.array([field_value(c, "epsilon_lower") for c in clients])
    if not np.isfinite(lower).any():
        return None
    x = np.arange(len(clients))
    fig, (ax,) = new_figure()
    ids = [int(c["client_id"]) for c in clients]
    shown = np.where(np.isposinf(upper), np.nan, upper)
    (_bounds_marked if len(ids) <= MAX_MARKED else _bounds_traced)(ax, x, shown, lower)
    crossed = np.isfinite(lower) & (lower > upper)
    if crossed.any():
        ax.plot(x[crossed], lower[crossed], linestyle="none", marker="o", markersize=10,
                markerfacecolor="none", color="#000000", label="lower > upper")  # fmt: skip
    if len(ids) <= MAX_MARKED:
        ax.set_xticks(x, [str(i) for i in ids], rotation=90 if len(ids) > 15 else 0)
        ax.set_xlabel("client (worst first)")
    else:
        ax.set_xlabel(f"client rank, worst first ({len(ids)} clients)")
    ax.set_ylabel("ε at δ")
    if log_scale_helps(np.concatenate([shown, lower])):
        ax.set_yscale("log")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title("ε: accountant's upper bound against the audit's lower bound")
    unbounded = sorted(i for i, u in zip(ids, upper, strict=True) if np.isposinf(u))
    note = f"Upper bound ∞ (not drawn) for {id_list(unbounded)}." if unbounded else ""
    alt = "epsilon upper and lower bounds per client"
    return Figure("epsilon-bounds", alt, svg_bytes(fig), note)


def shown_status(entry: Row) -> str | None:
    """A per-round entry's verification status as drawn: ``consistent`` only where the
    client-round's guarantee is ``verified``, else :data:`NOT_VERIFIED`."""
    status = (entry.get("verification") or {}).get("status")
    if status == "consistent" and entry.get("guarantee") != "verified":
        return NOT_VERIFIED
    return status


@styled
def verification_figure(clients: Sequence[Row]) -> Figure | None:
    """Per round, how many replies the server found consistent with their declaration: green
    where the client-round is ``verified``, pale blue where it is consistent but only
    ``declared``, unbounded or not tested (:func:`shown_status`)."""
    rounds, counts = status_counts(clients, status_of=shown_status)
    if not counts:
        return None
    fig, (ax,) = new_figure(height=3.0)
    bottom = np.zeros(len(rounds))
    for status in sorted(counts, key=lambda s: (s not in _STATUS_COLOURS, s)):
        ax.bar(
            rounds,
            counts[status],
            bottom=bottom,
            label=_LABELS.get(status, status),
            edgecolor="#000000",
            color=_STATUS_COLOURS.get(status, "#CC79A7"),
            hatch=_HATCHES.get(status, "//"),
            linewidth=0.5,
        )
        bottom += counts[status]
    finish_rounds(ax, rounds, np.array([]), "replies")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title("Declared mechanism checked against each update")
    return Figure("verification", "verification status per round", svg_bytes(fig))
