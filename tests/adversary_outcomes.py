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
status, aggregated rounds, ε) for a note.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reliability_support import QUICKSTART, LocalGrid

ADVERSARY = 0
CLIENTS = 5
ROUNDS = 3
BASE = [f"rounds={ROUNDS}", f"data.num_clients={CLIENTS}", "train.local_steps=1"]


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
    # ... and with it replayed: the signal less its replay is not the declared noise (σ = 0.5:
    # hidden steps leave a push the replay sees; at σ = 2 they may not, the report says)
    "signal-scale@oracle": Scenario(("audit.ground_truth=true",), behaviour="signal-scale"),
    "hidden-steps@oracle": Scenario(("audit.ground_truth=true", "mechanism.noise_multiplier=0.5"),
                                    behaviour="hidden-steps",
                                    expected=frozenset({"caught", "partly caught"})),
    "no-clip@oracle": Scenario(("audit.ground_truth=true", "mechanism.noise_multiplier=0.5"),
                               behaviour="no-clip",
                               expected=frozenset({"caught", "partly caught"})),
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


def main(names: list[str]) -> None:
    """Print the table for ``names`` (every behaviour when empty)."""
    import logging

    logging.disable(logging.WARNING)
    print(HEADER)
    for name in names or SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            outcome = run_behaviour(name, Path(tmp) / "run")
        print(outcome.row() + (f" {outcome.detail[:120]}" if outcome.detail else ""), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main(sys.argv[1:])
