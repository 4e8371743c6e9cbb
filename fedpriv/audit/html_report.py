"""``report.html``: one self-contained page per run, rendered from the report object.

Sections: the run; what the numbers mean; accuracy and loss; privacy per client over rounds
(ε, its lower bound where audited, log Bayes capacity, MBP/ABP); the clients, worst first;
verification (when present); attacks with true and reconstructed images side by side;
failures and rejections. Optional fields absent from the report leave no trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import fedpriv.audit.round_figures as rf
from fedpriv.audit.check_figures import epsilon_bounds_figure
from fedpriv.audit.gallery import AttackView
from fedpriv.audit.html_attacks import attacks_section
from fedpriv.audit.html_central import central_section
from fedpriv.audit.html_clients import clients_section, properties_section, verification_section
from fedpriv.audit.html_glossary import glossary
from fedpriv.audit.html_page import Section, cell, embed, esc, page, table
from fedpriv.audit.html_run import header_html, run_section
from fedpriv.audit.series import field_value, worst_first
from fedpriv.audit.vacuity import log_secret_space

__all__ = ["render_report_html"]

Row = Mapping[str, Any]


def _secret_space(config: Row) -> tuple[float, str] | None:
    space = log_secret_space(config)
    if space is None:
        return None
    return space[0], f"log |secret space| ≤ {space[0]:,.0f} nats (above: vacuous)"


def _privacy(clients: Sequence[Row], config: Row) -> Section:
    delta = next((c.get("delta") for c in clients if c.get("delta") is not None), None)
    threat = next((c.get("threat_model") for c in clients if c.get("threat_model")), "record")
    budgets = [field_value(c.get("budget"), "epsilon_budget") for c in clients]
    figures = [
        rf.per_client_figure(
            clients, "epsilon", f"cumulative ε at δ = {cell(delta)}",
            "Cumulative ε per client (accountant's upper bound, add/remove one record)",
            cumulative=True, budgets=[b for b in budgets if math.isfinite(b)]),
        epsilon_bounds_figure(clients),
        rf.per_client_figure(
            clients, "log_capacity_cumulative", "cumulative log Bayes capacity (nats)",
            f"Cumulative log Bayes capacity per client ({threat}-level)", cumulative=True,
            ceiling=_secret_space(config)),
        rf.bayes_figure(clients),
    ]  # fmt: skip
    body = (
        "".join(embed(f) for f in figures) or "<p>No privacy tallies in the completed rounds.</p>"
    )
    return "privacy", "Privacy per client over rounds", body


def _failures(report: Row) -> Section:
    listed = [("failure", f) for f in report.get("failures") or []]
    listed += [("rejection", r) for r in report.get("rejections") or []]
    if not listed:
        return "failures", "Failures and rejections", "<p>No failed or rejected replies.</p>"
    keys = ["round", "client_id", "node_id", "kind", "reason", "message"]
    extra = sorted({k for _, f in listed for k in f} - {*keys, "failure_id", "created"})
    keys = [k for k in keys if any(k in f for _, f in listed)] + extra
    rows = [[what, *(f.get(k) for k in keys)] for what, f in listed]
    return (
        "failures",
        "Failures and rejections",
        table([("", ""), *((k.replace("_", " "), "") for k in keys)], rows),
    )


def render_report_html(
    report: Row, attacks: Sequence[AttackView] = (), *, docs: str = "docs"
) -> str:
    """The run's page from its report object (:func:`fedpriv.audit.build_report`, or a
    loaded ``report.json``) and its attacks (:func:`fedpriv.audit.gallery.attack_views`);
    ``docs`` is the path from the page to the repository's ``docs/`` folder."""
    clients = worst_first(report.get("clients") or [])
    utility = embed(rf.utility_figure(report)) or "<p>No server-side evaluation recorded.</p>"
    sections: list[Section | None] = [
        run_section(report, clients),
        central_section(report, clients),  # Flower's DP wrappers and mods
        ("meaning", "What these numbers mean", glossary(clients, docs)),
        ("utility", "Accuracy and loss", utility),
        _privacy(clients, report.get("config") or {}),
        clients_section(clients),
        verification_section(clients),
        properties_section(clients),
        attacks_section(clients, attacks, report.get("completed_rounds") or [],
                        report.get("attacks_skipped") or []),
        _failures(report),
    ]
    present = [s for s in sections if s is not None]
    body = "".join(f'<section id="{a}"><h2>{esc(t)}</h2>{html}</section>' for a, t, html in present)
    title = f"fedpriv run {str(report.get('run_id'))[:12]}"
    return page(title, header_html(report, clients), [(a, t) for a, t, _ in present], body)
