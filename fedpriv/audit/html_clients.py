"""The run report's client table (worst first; the columns of ``tallies.csv`` at each
client's last tally) and, when the report carries it, the verification section."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fedpriv.audit.check_figures import verification_figure
from fedpriv.audit.html_page import Markup, Section, cell, embed, esc, table
from fedpriv.audit.report_trust import unamplified

__all__ = ["MAX_FLAGGED", "clients_section", "properties_section", "verification_section"]

#: Clients listed in the verification table (inconsistent first).
MAX_FLAGGED = 500
Row = Mapping[str, Any]
Column = tuple[str, str, Callable[[Row], Any]]  # header, tooltip, value of a client


def _last(client: Row, key: str) -> Any:
    values = [e.get(key) for e in client.get("per_round", []) if e.get(key) is not None]
    return values[-1] if values else None


def _last_round(client: Row) -> Any:
    rounds = [e["round"] for e in client.get("per_round", []) if e.get("epsilon") is not None]
    return rounds[-1] if rounds else None


def _accounting(client: Row) -> str | None:
    parts = [
        client.get("accountant"),
        client.get("route") and f"route {client['route']}",
        client.get("optimal_order") and f"α* {cell(client['optimal_order'], 3)}",
        client.get("compose"),
        client.get("sampling"),
    ]
    return " · ".join(str(p) for p in parts if p) or None


def _lower(key: str) -> Callable[[Row], Any]:
    return lambda c: (c.get("epsilon_lower") or {}).get(key)


def _observed(key: str) -> Callable[[Row], Any]:
    return lambda c: (c.get("epsilon_observed") or {}).get(key)


def _three(client: Row) -> str:
    """``[lower, declared, observed]``: the canary lower bound, the declared ε and the upper
    confidence bound from the updates ("–" where not measured)."""
    lower = (client.get("epsilon_lower") or {}).get("value")
    declared = (client.get("epsilon") if unamplified(client)  # the bound, not the claim
                else client.get("epsilon_declared", client.get("epsilon")))
    observed = (client.get("epsilon_observed") or {}).get("value")
    return f"[{cell(lower, 3)}, {cell(declared, 3)}, {cell(observed, 3)}]"


def _observed_noise(client: Row) -> str | None:
    doc = client.get("epsilon_observed") or {}
    if doc.get("noise_lower") is None:
        return None
    return f"{cell(doc['noise_lower'], 3)} of {cell(doc.get('noise_declared'), 3)}"


def _verification(client: Row) -> Any:
    v = client.get("verification")
    if not isinstance(v, Mapping):
        return v
    p = f" (p = {cell(v.get('p_value'), 3)})" if v.get("p_value") is not None else ""
    return Markup(f'<span class="nw">{esc(v.get("status"))}{p}</span>')


def _bound(key: str) -> Callable[[Row], Any]:
    """A bound as reported, or "vacuous" with the reason where it is beyond its quantity's
    range (:mod:`fedpriv.audit.vacuity`)."""
    def value(client: Row) -> Any:
        reason = (client.get("vacuous") or {}).get(key)
        if reason is None:
            return client.get(key)
        return Markup(f'<span class="nw" title="{esc(reason)}">vacuous '
                      f"({cell(client.get(key), 3)})</span>")
    return value


def _game(client: Row) -> str | None:
    """``log(M·P̂) [lower, upper] ≤ bound`` of the identification game (docs/leakage.md)."""
    g = client.get("empirical_leakage")
    if not isinstance(g, Mapping):
        return None
    relation = ">" if g.get("exceeds_bound") else "≤"
    return (f"{cell(g.get('log_value'), 3)} [{cell(g.get('log_lower'), 3)}, "
            f"{cell(g.get('log_upper'), 3)}] {relation} {cell(g.get('log_bound'), 3)}")


def _budget(key: str) -> Callable[[Row], Any]:
    return lambda c: (c.get("budget") or {}).get(key)


_COLUMNS: list[Column] = [
    ("client", "", lambda c: c["client_id"]),
    ("mechanism", "", lambda c: c.get("mechanism")),
    ("unit", "unit of privacy every ε is about: record (DP-SGD, add/remove one record) or "
     "client (the whole update; against the server: replace the client's data)",
     lambda c: c.get("unit")),
    ("guarantee", "", lambda c: c.get("guarantee")),
    ("rounds", "replies accepted", lambda c: c.get("rounds_participated")),
    ("last round", "round of the last tally", _last_round),
    ("ε", "cumulative ε at δ (accountant's upper bound; amplified by sampling only at a "
     "local size the server verified, else at q = 1)", lambda c: c.get("epsilon")),
    ("δ", "", lambda c: c.get("delta")),
    ("accounting", "accountant · route (privacy-math.md §3) · optimal Rényi order α* · "
     "composition unit · sampling (q = 1 where the server did not verify the local size)",
     _accounting),
    ("T", "noisy releases composed", lambda c: c.get("releases")),
    ("log C round", "log Bayes capacity of the last round (nats)",
     lambda c: _last(c, "log_capacity_round")),
    ("log C", "cumulative log Bayes capacity (nats); vacuous above log |secret space|",
     _bound("log_bayes_capacity")),
    ("threat", "record- or batch-level secret", lambda c: c.get("threat_model")),
    ("MBP bound", "", lambda c: c.get("mbp_bound")),
    ("MBP est.", "largest estimate observed", lambda c: c.get("mbp_estimate")),
    ("ABP bound", "vacuous above √log 2 ≈ 0.833, the largest ABP value",
     _bound("abp_bound")),
    ("ABP est.", "largest estimate observed", lambda c: c.get("abp_estimate")),
    ("best SSIM", "most leaking attack", lambda c: (c.get("attack") or {}).get("ssim")),
]  # fmt: skip
#: Columns added when some client carries the key.
_OPTIONAL: dict[str, list[Column]] = {
    "epsilon_lower": [("ε lower", "the audit's lower bound on ε", _lower("value")),
                      ("ε bounded", "the accountant's ε the lower bound is set against (for "
                       "canaries: a canary's per-round ε, without sampling)",
                       _lower("epsilon_formal")),
                      ("lower / ε", "fraction of the formal ε the audit reached",
                       _lower("ratio")),
                      ("confidence", "of the lower bound", _lower("confidence")),
                      ("method", "of the lower bound", _lower("method"))],
    "epsilon_observed": [("ε [lower, declared, observed]", "canary lower bound, the "
                          "declared ε (at q = 1 where the local size was not verified), and "
                          "the upper confidence bound from the updates", _three),
                         ("ε observed", "upper confidence bound: ε at the least noise the "
                          "updates show (assuming per-example clipping at the declared C)",
                          _observed("value")),
                         ("noise shown", "lower confidence bound on the noise parameter (σ, λ) "
                          "from the updates, against the declared one", _observed_noise),
                         ("why ∞", "why ε observed is infinite", _observed("reason"))],
    "verification": [("verification", "declared mechanism vs update", _verification)],
    "empirical_leakage": [("log M·P (game)", "identification game: log(M·P̂) over M candidates "
                           "with its Clopper-Pearson interval, against the declared release's "
                           "log Bayes capacity on them (nats)", _game)],
    "epsilon_central": [("ε aggregate", "client level: ε against a third party that sees only "
                         "the aggregate (add/remove of a client, Poisson-sampled at the client "
                         "rate, every round)", lambda c: c.get("epsilon_central")),
                        ("client rate", "fraction of clients sampled in the last round",
                         lambda c: c.get("client_rate"))],
    "pac_accuracy": [("PAC accuracy", "", lambda c: c.get("pac_accuracy"))],
    "pac_robust_confidence": [("PAC robust conf.", "", lambda c: c.get("pac_robust_confidence"))],
    "budget": [("ε budget", "", _budget("epsilon_budget")),
               ("exhausted", "round the budget ran out", _budget("exhausted_round"))],
}  # fmt: skip


#: Shown even when every client has the same value.
_ALWAYS = {"client", "ε", "log C", "best SSIM"}


def _shared(columns: list[Column], rows: list[list[Any]]) -> set[int]:
    """Indices of the columns (outside :data:`_ALWAYS`) every client has the same text in."""
    if len(rows) < 2:
        return set()
    return {
        k for k, (label, _, _) in enumerate(columns)
        if label not in _ALWAYS and len({cell(row[k]) for row in rows}) == 1
    }  # fmt: skip


def clients_section(clients: Sequence[Row]) -> Section:
    """One row per client, in the order given (worst first); a column with the same value
    for every client is stated once above the table instead."""
    columns = list(_COLUMNS)
    for key, extra in _OPTIONAL.items():
        if any(c.get(key) is not None for c in clients):
            columns += extra
    rows = [[get(c) for _, _, get in columns] for c in clients]
    shared = _shared(columns, rows)
    same = " · ".join(f"{esc(columns[k][0])} <b>{cell(rows[0][k])}</b>" for k in sorted(shared))
    keep = [k for k in range(len(columns)) if k not in shared]
    body = (
        '<p class="note">Worst first: by ε, then log Bayes capacity, then best attack SSIM. '
        "One row per client, at its last tally; <code>tallies.csv</code> has every round.</p>"
        + (f"<p>Every client: {same}.</p>" if same else "")
        + table([columns[k][:2] for k in keep], ([row[k] for k in keep] for row in rows))
    )
    return "clients", "Clients, worst first", body


_MARK = {"passed": "✓", "failed": "✗", "not-tested": "–"}


def properties_section(clients: Sequence[Row]) -> Section | None:
    """A compact table: one row per client, one column per property
    (fedpriv/verification/properties.py) — ✓ passed with useful power in every round, ✗ failed
    in some round, – not tested (or too little power) in some round — and why the client is
    only ``declared``. None when no client carries property verdicts."""
    having = [c for c in clients if isinstance(c.get("properties"), Mapping)]
    if not having:
        return None
    names = list(having[0]["properties"])
    rows = []
    for c in having[:MAX_FLAGGED]:
        marks = [_MARK.get(c["properties"].get(n, {}).get("status"), "?") for n in names]
        why = "; ".join(c.get("declared_reasons") or [])[:400]
        rows.append([c["client_id"], c.get("guarantee"), *marks, why])
    headers = [("client", ""), ("guarantee", ""), *((n, "") for n in names), ("why", "")]
    note = (
        '<p class="note"><b>verified</b> means: every ε-relevant property below was tested in '
        "every round and passed, each test with useful power (noise at 0.5 × declared or less "
        "caught with probability 0.99; a clipped sum 10 × its bound caught with probability "
        "0.99; both sides of the noise law applicable; deterministic checks run), per-record "
        "sensitivity included: the release less its replayed clipped signal was the declared "
        "noise (simulation with the oracle, audit.ground_truth; less noise that would double "
        "the release's ε caught with probability 0.99). <b>noise-verified</b>: all of that but "
        "sensitivity, which was not replayed — per-record sensitivity assumed. ✓ passed · "
        "✗ failed · – not tested or too little power. docs/trust.md has the power table.</p>"
    )
    return "properties", "What was tested, per client", note + table(headers, rows)


def verification_section(clients: Sequence[Row]) -> Section | None:
    """Per-round verification counts and the verdicts of the clients not found consistent,
    inconsistent first, then undeclared (stock clients); None when no client or round carries
    a verification."""
    fig = verification_figure(clients)
    checked = [c for c in clients if isinstance(c.get("verification"), Mapping)]
    if fig is None and not checked:
        return None
    order = {"inconsistent": 0, "undeclared": 1, "unverifiable": 2}
    flagged = [c for c in checked if c["verification"].get("status") in order]
    flagged.sort(key=lambda c: (order[c["verification"]["status"]], c["client_id"]))
    rows = [
        [c["client_id"], c.get("guarantee"),
         *(c["verification"].get(k) for k in ("status", "p_value", "reason"))]
        for c in flagged[:MAX_FLAGGED]
    ]  # fmt: skip
    headers = [("client", ""), ("guarantee", ""), ("status", ""), ("p-value", ""), ("reason", "")]
    listed = len(rows)
    consistent = [c for c in checked if c["verification"].get("status") not in order]
    verified = sum(c.get("guarantee") == "verified" for c in consistent)
    note = (
        f'<p class="note">At their last round: {len(consistent)} of {len(checked)} clients '
        f"consistent with their declaration, {verified} of them <b>verified</b> (green); the "
        f"other {len(consistent) - verified} only declared: an ε-relevant property was not "
        "tested (pale blue; \"What was tested, per client\" says which); "
        f"{listed} of the {len(flagged)} clients not consistent listed.</p>"
    )
    return (
        "verification",
        "Verification",
        embed(fig) + note + (table(headers, rows) if rows else ""),
    )
