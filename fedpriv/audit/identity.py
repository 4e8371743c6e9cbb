"""What the report says of identity: how the server bound nodes to clients (docs/trust.md §6)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["identity_summary"]


def identity_summary(tallies: Mapping[int, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """From the ``identity`` parts of the stored verdicts: ``binding`` is ``first-claim
    (unverified)`` if any client-round was bound by its node's own claim, else the binding's
    source (``simulation engine``, ``strategy.nodes``); None when no verdict has the part."""
    parts = [p for rows in tallies.values() for t in rows
             for p in json.loads(t.get("verification_json") or "{}").get("parts", [])
             if p.get("test") == "identity"]
    if not parts:
        return {"binding": None, "client_rounds": 0, "unverified": 0}
    unverified = [p for p in parts if p["status"] != "consistent"]
    binding = ("first-claim (unverified)" if unverified
               else parts[0]["reason"].rpartition(" by the ")[2])
    return {"binding": binding, "client_rounds": len(parts), "unverified": len(unverified)}
