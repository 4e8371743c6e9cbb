"""What the run report says each client's updates were tested for: the client's verdict over its
rounds, its per-property verdicts (:mod:`fedpriv.verification.properties`), its
``epsilon_observed`` as shown, the run's family-wise false-alarm bound, and what every ε bounds
under which assumptions (:func:`epsilon_bounds`). Read from the tallies' JSON columns by
:mod:`fedpriv.audit.report`.
"""

from __future__ import annotations

import json
from typing import Any

from fedpriv.jsonio import optional_loads
from fedpriv.ledger import UNVERIFIED_SIZE

__all__ = [
    "epsilon_bounds", "observed_summary", "properties_summary", "run_verification_summary",
    "unamplified", "verification_summary",
]  # fmt: skip

Row = dict[str, Any]



def observed_summary(doc: Row | None) -> Row | None:
    """``epsilon_observed`` as the report shows it: the cumulative bound, without the round's
    own observation (kept in the store for ``--resume``)."""
    if doc is None:
        return None
    return {k: v for k, v in doc.items() if k not in ("round_observation",)}


_VERDICT_ORDER = {"inconsistent": 0, "undeclared": 1, "consistent": 2, "unverifiable": 3}


def verification_summary(tallies: list[Row]) -> Row | None:
    """The client's verdict over its rounds: the first inconsistent round if any, else the
    last undeclared one (no report: a stock client), else the last consistent one, else the
    last unverifiable one (with the round it is from)."""
    verdicts = [(t["round"], optional_loads(t.get("verification_json"))) for t in tallies]
    verdicts = [(r, v) for r, v in verdicts if v]
    if not verdicts:
        return None
    rnd, verdict = min(verdicts, key=lambda rv: (_VERDICT_ORDER.get(rv[1]["status"], 4),
                                                 rv[0] if rv[1]["status"] == "inconsistent"
                                                 else -rv[0]))
    return {**verdict, "round": rnd}


_PROPERTY_ORDER = {"failed": 0, "not-tested": 1, "passed": 2}


def properties_summary(tallies: list[Row]) -> Row | None:
    """The client's per-property verdicts over its rounds (fedpriv/verification/properties.py):
    each property's worst status (failed, then not tested — which includes a test of too little
    power —, then passed), the count of rounds in each status, the reason and power of its
    worst round; and why the client is only ``declared`` (each distinct reason, first seen
    first). None when no round carries property verdicts."""
    summaries = [optional_loads(t.get("verification_json")) or {} for t in tallies]
    rounds = [v["properties"] for v in summaries if v.get("properties")]
    if not rounds:
        return None
    out: Row = {}
    for name in rounds[-1]:
        seen = [r[name] for r in reversed(rounds) if name in r]  # ties: the latest round
        worst = min(seen, key=lambda p: (_PROPERTY_ORDER.get(p["status"], 3), not p["useful"]))
        counts = {status: sum(p["status"] == status for p in seen) for status in _PROPERTY_ORDER}
        out[name] = {**worst, "rounds": counts}
    reasons = list(dict.fromkeys(r for v in summaries for r in v.get("declared_reasons", [])))
    return {"properties": out, "declared_reasons": reasons}


def run_verification_summary(tallies: dict[int, list[Row]], config: Row) -> Row:
    """How many client-rounds were tested, and the family-wise false-alarm bound: with ``m``
    statistical tests at level α each over the run, P(any false "inconsistent") ≤ m·α
    (Bonferroni; privacy-math.md §9)."""
    verdicts = [json.loads(t["verification_json"]) for rows in tallies.values() for t in rows
                if t.get("verification_json")]
    tests = sum(sum(p.get("p_value") is not None for p in v.get("parts", [])) for v in verdicts)
    alpha = config.get("audit", {}).get("verify_alpha", 1e-6)
    statuses = [v["status"] for v in verdicts]
    counts = {s: statuses.count(s)
              for s in ("consistent", "inconsistent", "unverifiable", "undeclared")}
    return {"alpha_per_test": alpha, "client_rounds": len(verdicts), "tests": tests, **counts,
            "family_wise_false_alarm_bound": min(1.0, alpha * tests)}


def unamplified(client: Row) -> bool:
    """Whether some of the client's releases are accounted at ``q = 1`` because the server did
    not verify its local size (:data:`fedpriv.ledger.UNVERIFIED_SIZE` in its ``sampling``)."""
    return UNVERIFIED_SIZE in (client.get("sampling") or "")


def epsilon_bounds(clients: list[Row], tallies: dict[int, list[Row]]) -> Row:
    """What the run's ε figures bound, and under which assumptions (docs/trust.md §2, §6).

    Parameters
    ----------
    clients
        The report's client entries (their ``sampling``).
    tallies
        Each client's tally rows (their stored verdicts).

    Returns
    -------
    dict
        ``epsilon`` and ``epsilon_observed``: what each is, in one sentence;
        ``unamplified_clients``: the clients some of whose releases are accounted at
        ``q = 1`` (:func:`unamplified`); ``fresh_noise_checked``: client-rounds whose
        ``fresh-noise`` property (replay and fresh-noise tests) passed, of ``client_rounds``
        with property verdicts; ``note``: one line for a terminal, None when every size was
        verified.
    """
    summaries = [optional_loads(t.get("verification_json")) or {} for rows in tallies.values()
                 for t in rows]
    rounds = [v["properties"] for v in summaries if v.get("properties")]
    fresh = sum((r.get("fresh-noise") or {}).get("status") == "passed" for r in rounds)
    ids = [c["client_id"] for c in clients if unamplified(c)]
    note = None if not ids else (
        f"epsilon of client(s) {', '.join(map(str, ids))}: at q = 1, no amplification by "
        f"sampling ({UNVERIFIED_SIZE}); epsilon_declared keeps the claimed size's")
    return {
        "epsilon": "an upper bound on the declared releases, amplified by sampling only at a "
                   "local size the server verified (simulation engine, [[strategy.nodes]]); "
                   "elsewhere accounted at q = 1, the claimed size's figure in "
                   "epsilon_declared",
        "epsilon_observed": "an upper confidence bound given per-record sensitivity (each "
                            "example's gradient clipped to the declared C, which no server "
                            "observes), at the sampling epsilon is accounted at; noise reused "
                            "across rounds is excluded only where the replay and fresh-noise "
                            "tests checked it (fresh_noise_checked)",
        "unamplified_clients": ids, "fresh_noise_checked": fresh, "client_rounds": len(rounds),
        "note": note,
    }  # fmt: skip
