"""Every ``[[adversary]]`` behaviour beside honest clients, through the real server code in
process (:class:`reliability_support.LocalGrid`), and what came of it.

:func:`run_behaviour` runs one behaviour on client 0 of a small quickstart-like federation
(5 clients of the digits, the paper MLP, 3 rounds of one local step) and reads the store:
in the rounds it cheats, was the adversary's reply aggregated, which ε and guarantee was it
given, did every honest client's reply reach aggregation (no veto), did the run complete.
The outcome is one of

* ``caught`` — not aggregated in any cheating round, ε unbounded (or nothing accounted: a
  reply refused at the boundary releases nothing the server keeps);
* ``neutralised`` — aggregated, but accounted at what the server knows (ε within a factor 2
  of an honest client's, where the cheat lied about its size);
* ``partly caught`` — aggregated in some cheating rounds, caught (ε unbounded) in another;
* ``labelled`` — aggregated, but not ``verified``;
* ``passes`` — aggregated and ``verified``;
* ``vetoed`` — a round's aggregation failed for everyone; ``run-fails`` — the run raised.

``python tests/adversary_outcomes.py [behaviour ...]`` prints the table (cheat → outcome,
status, aggregated rounds, ε) for a note; ``python tests/adversary_outcomes.py --markdown``
writes docs/trust.md's generated tables (between their marker comments: :func:`regenerate`) —
that table for every behaviour, and issue 42's sensitivity cheats by σ with the oracle
(:func:`sigma_table`) — and ``--check`` only says whether the page differs (exit 1).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reliability_support import QUICKSTART, LocalGrid, committed_margin

ADVERSARY = 0
CLIENTS = 5
ROUNDS = 3
# no attack: the outcomes are the verification's (the default attacks one client a round)
BASE = [f"rounds={ROUNDS}", f"data.num_clients={CLIENTS}", "train.local_steps=1",
        "audit.attacks=[]"]


@dataclass(frozen=True)
class Scenario:
    """How to run one behaviour and the outcomes the auditor must give it."""

    overrides: tuple[str, ...] = ()
    table: str = ""
    first_cheat: int = 1  # replays send an honest first round
    expected: frozenset[str] = frozenset({"caught"})
    behaviour: str | None = None  # when the key is a variant's label (``name@variant``)


_VMF = ("mechanism.name=vmf", "mechanism.kappa=1000.0")

SCENARIOS: dict[str, Scenario] = {
    "under-noise": Scenario(),
    "no-noise": Scenario(),
    "false-sample-rate": Scenario(),
    "scale-update": Scenario(),
    "malformed": Scenario(),
    "replay": Scenario(first_cheat=2),
    "declare-tiny-sigma": Scenario(),  # refused at the boundary: sigma below MIN_NOISE
    "declare-huge-steps": Scenario(),  # settings: steps sent 1, declared more
    # conformed, not refused: the unknown metric is dropped before aggregation, so no veto;
    # aggregated with the honest label its tests earn
    "extra-metric": Scenario(expected=frozenset({"passes", "labelled"})),
    "rename-arrays": Scenario(),  # the reply check compares array names
    "inflate-size": Scenario(expected=frozenset({"caught", "neutralised"})),
    "steal-identity": Scenario(table=", target = 3"),
    "declare-lr": Scenario(),
    "declare-fewer-steps": Scenario(),  # at one declared step: the noise is too large
    "declare-optimizer": Scenario(),
    "rademacher-noise": Scenario(),
    "uniform-noise": Scenario(),
    # the quadrature bound's power at B = 32 is below 1: caught in some rounds, then unbounded
    "signal-scale": Scenario(expected=frozenset({"caught", "partly caught"})),
    # per-example clipping is the one property no server observes while the unclipped sum stays
    # within C·B (docs/trust.md): never verified, not caught
    "no-clip": Scenario(expected=frozenset({"caught", "partly caught", "labelled"})),
    "reuse-noise": Scenario(first_cheat=2),
    "cancel-noise": Scenario(first_cheat=2, expected=frozenset({"caught", "partly caught"})),
    "perturbed-replay": Scenario(first_cheat=2),
    "vmf-kappa": Scenario(_VMF, expected=frozenset({"caught", "labelled"})),  # κ: not testable
    # 20 local steps: the norm test cannot see noise × 0.3 (never verified; epsilon_observed ∞;
    # audit.release = "steps" catches it)
    "weak-under-noise": Scenario(("train.local_steps=20",),
                                 expected=frozenset({"caught", "labelled"})),
    # issue 42: per-record sensitivity, invisible to every test of the update's noise; without
    # the oracle never verified (noise-verified: sensitivity assumed) ...
    "hidden-steps": Scenario(expected=frozenset({"labelled"})),
    # ... and with it replayed: the release less its replayed signal and its committed noise,
    # re-drawn from the client's declared seeded stream, is not rounding (committed-noise)
    "signal-scale@oracle": Scenario(("audit.ground_truth=true",), behaviour="signal-scale"),
    "hidden-steps@oracle": Scenario(("audit.ground_truth=true",), behaviour="hidden-steps"),
    "no-clip@oracle": Scenario(("audit.ground_truth=true",), behaviour="no-clip"),
    # steps mode: +z at one step, −z at the next (issue 42 item 6)
    "cancel-steps": Scenario(("audit.release=steps", "train.local_steps=4")),
}


@dataclass(frozen=True)
class Outcome:
    """What came of one behaviour (module docstring)."""

    behaviour: str
    outcome: str
    status: str
    aggregated: int  # cheating rounds in which the adversary's reply was aggregated
    cheating_rounds: int
    epsilon: float | None
    guarantee: str | None
    honest_aggregated: bool  # every honest reply of every round reached aggregation
    detail: str = ""

    def row(self) -> str:
        eps = "-" if self.epsilon is None else f"{self.epsilon:.3g}"
        return (f"| {self.behaviour} | {self.outcome} | {self.status} | "
                f"{self.aggregated}/{self.cheating_rounds} | {eps} | {self.guarantee or '-'} | "
                f"{'yes' if self.honest_aggregated else 'NO'} |")


HEADER = ("| cheat | outcome | run | aggregated (cheating rounds) | adversary ε | guarantee | "
          "honest aggregated |\n| --- | --- | --- | --- | --- | --- | --- |")


def _aggregated(store, node: int, rnd: int) -> bool:  # noqa: ANN001
    """Whether the node's reply of round ``rnd`` reached aggregation."""
    ok = store.query("SELECT count(*) AS n FROM updates WHERE round = ? AND node_id = ? AND "
                     "status = 'ok'", (rnd, str(node)))[0]["n"]
    failed = store.query("SELECT count(*) AS n FROM failures WHERE round = ? AND "
                         "(node_id = ? OR node_id IS NULL)", (rnd, str(node)))[0]["n"]
    return ok > 0 and failed == 0


def run_behaviour(behaviour: str, run_dir: Path, *, app=None) -> Outcome:  # noqa: ANN001
    """Run ``behaviour`` (a key of :data:`SCENARIOS`) on client 0 beside honest clients 1–4
    (module docstring)."""
    from clients.client_app import app as client_app
    from fedpriv.audit import AuditStore
    from strategies.server_run import run_federation
    from workflows.config import load_config

    scenario = SCENARIOS[behaviour]
    name = scenario.behaviour or behaviour
    table = f"{{clients = [{ADVERSARY}], behaviour = '{name}'{scenario.table}}}"
    cfg = load_config(QUICKSTART, [*BASE, *scenario.overrides, f"adversary=[{table}]"])
    cheating = ROUNDS - scenario.first_cheat + 1
    try:
        report = run_federation(LocalGrid(app or client_app, CLIENTS), cfg, run_dir)
    except Exception as exc:  # noqa: BLE001 - the outcome of this cheat
        return Outcome(behaviour, "run-fails", "raised", 0, cheating, None, None, False,
                       f"{type(exc).__name__}: {exc}")
    with AuditStore.open(run_dir, readonly=True) as store:
        rounds = range(scenario.first_cheat, ROUNDS + 1)
        aggregated = sum(_aggregated(store, 1000 + ADVERSARY, r) for r in rounds)
        honest = all(_aggregated(store, 1000 + c, r)
                     for c in range(1, CLIENTS) for r in range(1, ROUNDS + 1))
        vetoed = store.query("SELECT count(*) AS n FROM failures WHERE node_id IS NULL AND "
                             "client_id IS NULL")[0]["n"]
    clients = {c["client_id"]: c for c in report["clients"]}
    claimed = int(scenario.table.split("=")[1]) if "target" in scenario.table else ADVERSARY
    mine = clients.get(claimed, {})
    eps, guarantee = mine.get("epsilon"), mine.get("guarantee")
    honest_eps = [clients[c]["epsilon"] for c in range(1, CLIENTS)
                  if c in clients and c != claimed]
    if report["status"] != "completed":
        outcome = "run-fails"
    elif vetoed:
        outcome = "vetoed"
    elif aggregated == 0:  # ε unbounded, or refused at the boundary (nothing accounted)
        outcome = "caught"
    elif guarantee == "unbounded":
        outcome = "partly caught"  # aggregated in some cheating rounds, caught in a later one
    elif guarantee != "verified":
        outcome = "labelled"
    elif behaviour == "inflate-size" and eps is not None and honest_eps and \
            eps >= 0.5 * min(honest_eps):
        outcome = "neutralised"
    else:
        outcome = "passes"
    return Outcome(behaviour, outcome, report["status"], aggregated, cheating, eps, guarantee,
                   honest)


def _line(outcome: Outcome) -> str:
    return outcome.row() + (f" {outcome.detail[:120]}" if outcome.detail else "")


def outcomes_table() -> str:
    """The Markdown table of every behaviour's outcome (:data:`SCENARIOS`, in order)."""
    lines = [HEADER]
    for name in SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            lines.append(_line(run_behaviour(name, Path(tmp) / "run")))
    return "\n".join(lines)


# issue 42's sensitivity cheats, each on its own client beside two honest ones, with the oracle
SIGMAS = (2.0, 1.0, 0.5)
SENSITIVITY_CHEATS = {"signal-scale:10": "signal × 10", "hidden-steps:5": "5 hidden steps at σ/√5",
                      "hidden-steps:3": "3 hidden steps at σ/√3", "no-clip": "no clipping"}
SIGMA_HONEST = 2
_POWER = re.compile(r"clipped signal × ([0-9.e+inf]+) \(ε × ([0-9.e+inf]+)\)")


def _first_caught(verdicts: dict[int, dict]) -> str:
    """The first round a cheat was ``inconsistent`` and the checks that failed, or its label."""
    for rnd in sorted(verdicts):
        v = verdicts[rnd]
        if v["status"] == "inconsistent":
            failed = [p["test"] for p in v["parts"] if p["status"] == "inconsistent"]
            return f"round {rnd} ({', '.join(failed)})"
    return f"not caught (`{verdicts[max(verdicts)].get('label')}`)"


def sigma_row(sigma: float, run_dir: Path, *, app=None) -> str:  # noqa: ANN001
    """One row of :func:`sigma_table`: the four cheats on clients 0–3 and two honest clients,
    at noise multiplier ``sigma``, batch 16, C = 1, one local step, :data:`ROUNDS` rounds."""
    from clients.client_app import app as client_app
    from fedpriv.audit import AuditStore
    from strategies.server_run import run_federation
    from workflows.config import load_config

    cheats = list(SENSITIVITY_CHEATS)
    clients = len(cheats) + SIGMA_HONEST
    tables = ", ".join(f"{{clients = [{c}], behaviour = '{b.split(':')[0]}'"
                       + (f", factor = {b.split(':')[1]}" if ":" in b else "") + "}"
                       for c, b in enumerate(cheats))
    cfg = load_config(QUICKSTART, [f"rounds={ROUNDS}", f"data.num_clients={clients}",
                                   "train.local_steps=1", "train.batch_size=16",
                                   "mechanism.clip=1.0", f"mechanism.noise_multiplier={sigma}",
                                   "audit.ground_truth=true", "audit.attacks=[]",
                                   f"adversary=[{tables}]"])
    run_federation(LocalGrid(app or client_app, clients), cfg, run_dir)
    with AuditStore.open(run_dir, readonly=True) as store:
        rows = store.query("SELECT round, client_id, verification_json FROM tallies "
                           "WHERE verification_json IS NOT NULL")
    verdicts: dict[int, dict[int, dict]] = {}
    for row in rows:
        verdicts.setdefault(row["client_id"], {})[row["round"]] = json.loads(
            row["verification_json"])
    honest = [v for c in range(len(cheats), clients) for v in verdicts[c].values()]
    factors, ratios, bounds = [], [], []
    for v in honest:
        power = _POWER.search(v["properties"]["sensitivity"]["power"] or "")
        margin = committed_margin(v)
        if power:
            factors.append(float(power[1]))
            ratios.append(float(power[2]))
        if margin:
            bounds.append(margin[1])
    stated = (f"× {statistics.median(factors):.2g} (ε × {statistics.median(ratios):.2g})"
              if factors else "-")
    exact = f"{max(bounds):.2g} noise stds" if bounds else "-"
    cells = [_first_caught(verdicts[c]) for c in range(len(cheats))]
    label = "2 (issue 42's probe)" if sigma == 2.0 else f"{sigma:g}"
    return f"| {label} | " + " | ".join([*cells, stated, exact]) + " |"


def sigma_table() -> str:
    """The Markdown table of issue 42's sensitivity cheats by σ, with the oracle (docs/trust.md
    §2): the first round each was refuted and by which checks; for the honest clients, the
    median smallest signal scaling the statistical replay catches (and its ε-ratio) and the
    committed-noise check's largest rounding bound (any larger deviation is caught)."""
    header = ("| σ (B = 16) | " + " | ".join(SENSITIVITY_CHEATS.values())
              + " | honest: smallest signal scaling the statistical replay catches (ε-ratio) "
              "| honest: committed-noise bound (largest) |\n"
              + "| --- " * (len(SENSITIVITY_CHEATS) + 3) + "|")
    lines = [header]
    for sigma in SIGMAS:
        with tempfile.TemporaryDirectory() as tmp:
            lines.append(sigma_row(sigma, Path(tmp) / "run"))
    return "\n".join(lines)


DOC = Path(__file__).resolve().parents[1] / "docs" / "trust.md"
TABLES: dict[str, Callable[[], str]] = {"sensitivity-cheats-by-sigma": sigma_table,
                                        "adversary-outcomes": outcomes_table}
"""docs/trust.md's generated tables by marker name, and what makes each."""


def markers(name: str) -> tuple[str, str]:
    """The comments that open and close the generated table ``name`` in docs/trust.md."""
    return (f"<!-- generated by `python tests/adversary_outcomes.py --markdown`: {name} -->",
            f"<!-- end of generated {name} -->")


def regenerate(text: str, tables: dict[str, str]) -> str:
    """``text`` with each generated table ``name`` replaced by ``tables[name]``. ValueError
    when its markers are missing."""
    for name, table in tables.items():
        start, end = markers(name)
        if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
            raise ValueError(f"docs/trust.md: the markers of generated table {name!r} are "
                             "missing or out of order")
        head, rest = text.split(start)
        tail = rest.split(end)[1]
        text = f"{head}{start}\n{table}\n{end}{tail}"
    return text


def main(argv: list[str]) -> int:
    """Print the outcome table for the behaviours named (every one when none); with
    ``--markdown`` write docs/trust.md's generated tables, with ``--check`` only compare."""
    import logging

    logging.disable(logging.WARNING)
    if "--markdown" in argv or "--check" in argv:
        text = DOC.read_text(encoding="utf-8")
        new = regenerate(text, {name: make() for name, make in TABLES.items()})
        if "--check" in argv:
            print("docs/trust.md is up to date" if new == text else "docs/trust.md differs")
            return 0 if new == text else 1
        DOC.write_text(new, encoding="utf-8")
        return 0
    print(HEADER)
    for name in argv or SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            print(_line(run_behaviour(name, Path(tmp) / "run")), flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv[1:]))
