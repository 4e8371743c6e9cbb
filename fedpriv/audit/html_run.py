"""The run report's header and its first section: status, rounds, integrity, wall time,
version, the mechanism of each client and the configuration."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from fedpriv.audit.html_page import Markup, Section, cell, esc, table
from fedpriv.audit.series import field_value

__all__ = ["header_html", "id_ranges", "run_section"]

Row = Mapping[str, Any]


def id_ranges(ids: Sequence[int]) -> str:
    """Sorted ids with runs collapsed: ``[5, 0, 1, 2]`` → ``"0–2, 5"``."""
    parts: list[tuple[int, int]] = []
    for i in sorted(ids):
        if parts and parts[-1][1] == i - 1:
            parts[-1] = (parts[-1][0], i)
        else:
            parts.append((i, i))
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in parts)


def header_html(report: Row, clients: Sequence[Row]) -> str:
    """Title with the run's status and one line of headline facts; ``clients`` worst first."""
    status = str(report.get("status"))
    kind = {"completed": "good", "failed": "bad", "interrupted": "bad"}.get(status, "")
    rounds = report.get("rounds") or 0
    facts = [
        f"{len(clients)} client{'s' * (len(clients) != 1)}",
        f"{rounds} completed round{'s' * (rounds != 1)}",
    ]
    if clients and not math.isnan(field_value(clients[0], "epsilon")):
        worst = clients[0]
        facts.append(
            f"worst ε = {cell(worst.get('epsilon'))} at δ = {cell(worst.get('delta'))}"
            f" (client {esc(worst['client_id'])})"
        )
    return (
        f"<h1>Privacy audit of run <code>{esc(str(report.get('run_id'))[:12])}</code> "
        f'<span class="badge {kind}">{esc(status)}</span></h1>'
        f'<p class="sub">{" · ".join(facts)}</p>'
    )


def _integrity(report: Row) -> str:
    if "integrity" not in report:
        return (
            "not checked in this copy (the report a run writes skips the store check; "
            "<code>fedpriv report RUN_DIR</code> runs it)"
        )
    problems = report["integrity"].get("problems", [])
    verdict = "passed" if report["integrity"].get("ok") else '<span class="badge bad">failed</span>'
    listed = "".join(
        f"<li>{esc(p.get('severity'))}: <code>{esc(p.get('path'))}</code>: "
        f"{esc(p.get('message'))}</li>"
        for p in problems
    )
    return verdict + (f" ({len(problems)} finding(s))<ul>{listed}</ul>" if problems else "")


def _flat(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if not isinstance(config, Mapping):
        return [(prefix.rstrip("."), config)]
    return [kv for k, v in config.items() for kv in _flat(v, f"{prefix}{k}.")]


def _facts(report: Row) -> list[tuple[str, str]]:
    config = report.get("config")
    planned = config.get("rounds") if isinstance(config, Mapping) else None
    done = report.get("completed_rounds") or []
    incomplete = report.get("incomplete_rounds") or []
    wall = report.get("wall_seconds")
    error = f" — {esc(report['error'])}" if report.get("error") else ""
    return [
        ("run id", esc(report.get("run_id"))),
        ("status", esc(report.get("status")) + error),
        ("completed rounds", f"{len(done)}" + (f" of {esc(planned)}" if planned else "")
         + (f" ({id_ranges(done)})" if done else "")),
        ("incomplete rounds", id_ranges(incomplete) if incomplete else "none"),
        ("integrity check", _integrity(report)),
        ("chain head", f"<code>{esc((report.get('chain') or {}).get('head'))}</code> (keep it "
         "outside the run directory: <code>fedpriv verify RUN_DIR --head H</code>)"),
        ("wall time", "still running" if wall is None else f"{cell(wall, 3)} s"),
        ("fedpriv version", esc(report.get("fedpriv_version"))),
        ("seed", esc(report.get("seed"))),
        ("run directory", f"<code>{esc(report.get('run_dir'))}</code>"),
    ]  # fmt: skip


def _params(params: Any) -> str:
    if not isinstance(params, Mapping):
        return cell(params)
    return ", ".join(f"{esc(k)} = {cell(v)}" for k, v in params.items()) or "–"


def _mechanisms(clients: Sequence[Row]) -> str:
    """One row per distinct (mechanism, parameters), with the clients that used it."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for c in clients:
        key = (str(c.get("mechanism")), json.dumps(c.get("mechanism_params"), sort_keys=True))
        groups.setdefault(key, []).append(c)
    rows = [
        [
            members[0].get("mechanism"),
            Markup(_params(members[0].get("mechanism_params"))),
            ", ".join(sorted({str(m.get("guarantee")) for m in members})),
            id_ranges([int(m["client_id"]) for m in members]),
        ]
        for members in groups.values()
    ]
    headers = [("mechanism", ""), ("parameters", ""), ("guarantee", ""), ("clients", "")]
    return table(headers, rows)


def run_section(report: Row, clients: Sequence[Row]) -> Section:
    """The run: facts, mechanism per client, the whole configuration."""
    facts = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in _facts(report))
    config = "".join(
        f"<li><code>{esc(k)}</code> = {cell(v)}</li>" for k, v in _flat(report.get("config") or {})
    )
    body = (
        f'<dl class="kv">{facts}</dl><h3>Mechanism per client</h3>{_mechanisms(clients)}'
        f'<h3>Configuration</h3><ul class="config">{config}</ul>'
    )
    return "run", "The run", body
