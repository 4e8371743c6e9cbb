"""report.json's per-client property verdicts and report.html's property table
(fedpriv/audit/report_trust.py ``properties_summary``; fedpriv/audit/html_clients.py
``properties_section``)."""

from __future__ import annotations

import json

from fedpriv.audit.html_clients import properties_section
from fedpriv.audit.report_trust import properties_summary


def _round(rnd: int, noise: str, reasons: list[str]) -> dict:
    props = {
        "noise-scale": {"status": noise, "reason": f"round {rnd}", "power": "p", "useful":
                        noise == "passed"},
        "identity": {"status": "passed", "reason": "bound", "power": "deterministic",
                     "useful": True},
    }
    summary = {"status": "consistent", "properties": props, "label":
               "declared" if reasons else "verified", "declared_reasons": reasons}
    return {"round": rnd, "verification_json": json.dumps(summary)}


def test_worst_status_over_rounds_with_counts_and_reasons() -> None:
    tallies = [_round(1, "passed", []), _round(2, "not-tested", ["noise-scale: weak"]),
               _round(3, "passed", []), _round(4, "not-tested", ["noise-scale: weak"])]
    out = properties_summary(tallies)
    assert out["properties"]["noise-scale"]["status"] == "not-tested"
    assert out["properties"]["noise-scale"]["reason"] == "round 4"  # the latest of the worst
    assert out["properties"]["noise-scale"]["rounds"] == {"failed": 0, "not-tested": 2,
                                                          "passed": 2}
    assert out["properties"]["identity"]["status"] == "passed"
    assert out["declared_reasons"] == ["noise-scale: weak"]
    bare = {"round": 1, "verification_json": json.dumps({"status": "x"})}
    assert properties_summary([bare]) is None


def test_html_table_marks_each_property() -> None:
    client = {"client_id": 3, "guarantee": "declared",
              **properties_summary([_round(1, "failed", ["noise-scale: failed (x)"])])}
    anchor, title, html = properties_section([client])
    assert anchor == "properties" and "verified" in html
    assert "<th>noise-scale</th>" in html and "✗" in html and "✓" in html
    assert properties_section([{"client_id": 1, "properties": None}]) is None
