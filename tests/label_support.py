"""What an honest client's label must say (issue 25 item 6; fedpriv/verification/properties.py):
``verified`` exactly when every ε-relevant property passed a test of useful power,
``noise-verified`` when only per-record sensitivity was not tested (no replay without the
oracle), else ``declared`` with the reasons — never because a property failed."""

from __future__ import annotations

from typing import Any


def assert_labelled_by_tests(client: dict[str, Any]) -> None:
    """An honest client's entry of report.json: its guarantee follows its property verdicts."""
    reasons = client.get("declared_reasons") or []
    expected = ("verified" if not reasons else "noise-verified"
                if all(r.startswith("sensitivity: not-tested") for r in reasons) else "declared")
    assert client["guarantee"] == expected, (client["guarantee"], reasons)
    assert not any(": failed" in r for r in reasons), reasons
    properties = client.get("properties") or {}
    assert properties, "no property verdicts in the report"
    assert all(p["status"] != "failed" for p in properties.values()), properties
