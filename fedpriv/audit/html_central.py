"""The report page's section on Flower's DP building blocks (docs/flower-dp.md): the run-level
``central`` block of a DP strategy wrapper, what it protects against whom, and the warnings
about Flower's client mods (:mod:`fedpriv.audit.report_central`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fedpriv.audit.html_page import Section, esc, table

__all__ = ["central_section"]

Row = Mapping[str, Any]

_FIELDS = (
    ("epsilon", "ε against a third party that sees only the aggregate (fedpriv, tightest route)"),
    ("flower_epsilon", "Flower's own accountant's ε at the same δ (None: no accountant)"),
    ("delta", "δ of both"),
    ("route", "the route that gave fedpriv's ε"),
    ("noise_multiplier", "σ of the wrapper (adaptive clipping: the composite σ)"),
    ("noise_multiplier_effective", "least σ of a released round, over the clients aggregated"),
    ("clipping_norm", "C, the clipping norm (adaptive: as of the last round)"),
    ("sampling", "how the strategy sampled clients (last round)"),
    ("neighbouring", "the neighbouring relation of the central ε"),
    ("releases", "rounds that released a noised aggregate"),
)


def central_section(report: Row, clients: Sequence[Row]) -> Section | None:
    """The section, or None for a run with neither a DP wrapper nor Flower's DP mods."""
    central = report.get("central")
    warned = [(c["client_id"], w) for c in clients for w in (c.get("warnings") or [])]
    reasons = sorted({c["epsilon_reason"] for c in clients if c.get("epsilon_reason")})
    if central is None and not warned:
        return None
    parts = []
    if central is not None:
        parts.append(
            f"<p>{esc(central['wrapper'])}: {esc(central['mechanism'])}. Against the server: "
            f"{esc(central['against_server']['reason'])}. Assumed: "
            f"{esc(central['assumption'])}.</p>")
        parts.append(table([("quantity", ""), ("value", "")],
                           [(f"{key} — {tip}", central.get(key)) for key, tip in _FIELDS]))
    if reasons:
        parts.append("<p>Why clients have no ε against the server:</p><ul>"
                     + "".join(f"<li>{esc(r)}</li>" for r in reasons) + "</ul>")
    if warned:
        parts.append('<p class="bad">Warnings about Flower\'s client mods:</p><ul>' + "".join(
            f"<li>client {esc(cid)}: {esc(w)}</li>" for cid, w in warned) + "</ul>")
    return ("central", "Central differential privacy (Flower's DP)", "".join(parts))
