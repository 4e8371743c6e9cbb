"""What every stage of a round shares: the run's context (:class:`RunState`), the round
(:class:`Round`), one reply on its way through the stages (:class:`Reply`), the interface of a
stage (:class:`Stage`) and the one way a stage turns a reply down (:func:`reject`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from flwr.app import Message

from fedpriv.audit import AuditStore
from fedpriv.audit.config import AuditConfig
from fedpriv.config import Config
from fedpriv.data import Dataset
from fedpriv.failures import FirstSeen, log_first
from fedpriv.kept import KeptAnswers
from fedpriv.ledger import PrivacyLedger
from fedpriv.protocol import ClientReport
from fedpriv.training.config import TrainConfig
from fedpriv.verification import Verdict
from fedpriv.verification.observed import NoiseObservation
from fedpriv.verification.replay import UpdateSketches
from fedpriv.verification.update import flatten
from strategies.attack_schedule import AttackPlan
from strategies.canary_audit import CanaryAuditor
from strategies.identity import NodeBinding
from strategies.replies import AcceptedReply, Rejection, RoundIdentities
from strategies.reply_verdicts import update_row

__all__ = ["Reply", "Round", "RunState", "Stage", "declared", "live", "reject"]

log = logging.getLogger("strategies.pipeline")


_KEPT_ACCURACIES = 1024
"""Most PAC accuracies a run keeps (distinct mechanisms, ``p`` and ``q·n``)."""


@dataclass(eq=False)
class RunState:
    """The run's context, which the stages read and update: its settings, store, ledger,
    attack plan and canary auditor, and what the server has learnt of its clients."""

    audit: AuditConfig
    store: AuditStore
    ledger: PrivacyLedger
    plan: AttackPlan
    canaries: CanaryAuditor
    dataset: Dataset
    model: tuple[str, tuple[int, ...], int]  # name, input shape, classes: what attacks rebuild
    train: TrainConfig
    seed: int
    config: Config | None = None
    binding: NodeBinding = field(default_factory=NodeBinding)
    exhausted: set[int] = field(default_factory=set)  # declined for their ε budget
    written: set[int] = field(default_factory=set)  # clients with an updates row this round
    identities: RoundIdentities | None = None
    dim: int = 0  # the broadcast's size
    sketches: UpdateSketches | None = None  # replayed updates (verification/replay)
    replay: Any = None  # the oracle's sensitivity replay (strategies/sensitivity_replay.py)
    logged: FirstSeen = field(default_factory=FirstSeen)  # failures logged once per kind
    accuracies: KeptAnswers[float | None] = field(
        default_factory=lambda: KeptAnswers(_KEPT_ACCURACIES))  # by mechanism, p and q·n

    def sketches_of(self, dim: int) -> UpdateSketches:
        if self.sketches is None:
            self.sketches = UpdateSketches(dim, self.seed)
        return self.sketches

    def accuracy(self, report: ClientReport, dim: int) -> float | None:
        """PAC accuracy α of one release of the declared mechanism at ``audit.pac_beta``;
        the divisor is ``q·n`` (= min(L, n)), as in training. Computed once per distinct
        mechanism, ``p`` and ``q·n`` of the run (stages 2 and 9 ask it of every reply)."""
        return self.accuracies.get(
            (report.mechanism, dim, report.divisor),
            lambda: report.mechanism.pac_accuracy(self.ledger.pac_beta, dim, report.divisor))

    def truth(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        ids = list(ids)
        return self.dataset.train_x[ids].numpy(), self.dataset.train_y[ids].numpy()


@dataclass(eq=False)
class Round:
    """One round's batch context: its number, θ as broadcast (and its array names), and the
    clients the attack plan attacks, chosen once over the whole round (:func:`strategies.
    stages.run_round`)."""

    number: int
    broadcast: Sequence[np.ndarray]
    names: Sequence[str] | None
    run: RunState
    attacked: set[int] = field(default_factory=set)

    @cached_property
    def theta(self) -> tuple[np.ndarray, float]:
        """θ flattened to float64 (read-only: the verification keeps its norms) and its ℓ2
        norm, once per round instead of once per reply."""
        flat = flatten(self.broadcast)
        flat.flags.writeable = False
        return flat, float(np.linalg.norm(flat))


@dataclass(eq=False)
class Reply:
    """One reply on its way through the stages: what each stage found of it so far."""

    node: int
    message: Message
    accepted: AcceptedReply | None = None  # set by the conform stage
    rejected: bool = False  # turned down: later stages skip it, it is not aggregated
    dim: int = 0
    delta: list[np.ndarray] = field(default_factory=list)  # Δ = θ_client − θ, float32
    flat: np.ndarray | None = None  # Δ flattened
    clean: list[np.ndarray] | None = None  # the parameters without canaries
    canary: Any = None  # the canary auditor's round (score, verdict, memory, lower bound)
    share: Any = None  # the canaries' share of each step release (steps mode)
    verdict: Verdict | None = None
    observation: NoiseObservation | str = "not observable: a replayed update"
    fresh: bool = False  # verified against fresh θ (not a replay): the fresh-noise test runs
    recovered: Any = None  # the update recovered from the reply (verification stage)
    summary: dict = field(default_factory=dict)
    release: Any = None
    tally: dict = field(default_factory=dict)
    attacked: bool = False
    truth: list[int] = field(default_factory=list)

    @property
    def report(self) -> ClientReport | None:
        assert self.accepted is not None
        return self.accepted.report

    @property
    def client_id(self) -> int:
        assert self.accepted is not None
        return self.accepted.client_id

    @property
    def consistent(self) -> bool:
        return self.verdict is None or self.verdict.status != "inconsistent"


Stage = Callable[[list[Reply], Round], None]
"""A stage: takes the round's batch of replies and the round, records what it finds on each
reply (its verdict, tally, rows…), and turns down (:func:`reject`) what cannot go on."""


def live(batch: list[Reply]) -> list[Reply]:
    """The replies still on their way (accepted, not turned down)."""
    return [r for r in batch if r.accepted is not None and not r.rejected]


def declared(batch: list[Reply]) -> list[Reply]:
    """The live replies that came with a report."""
    return [r for r in live(batch) if r.report is not None]


def reject(run: RunState, rnd: int, rejection: Rejection, reply: Reply | None = None) -> None:
    """Record a reply that cannot be aggregated as that client's failure (never raised): a
    failure row, and one ``updates`` row per client and round; a declined client's tallies
    stand as they were. ``reply``: the batch's reply, marked turned down."""
    if reply is not None:
        reply.rejected = True
    node, cid = rejection.node_id, rejection.client_id
    declined = rejection.kind == "declined"
    log_first(log, run.logged, node, rejection.kind, rejection.reason,
              "round %d: reply from node %d rejected (%s): %s", rnd, node, rejection.kind,
              rejection.reason, level=logging.INFO if declined else logging.WARNING)
    run.store.record_failure(rnd, rejection.kind, rejection.reason, client_id=cid, node_id=node)
    if declined and cid is not None:
        run.exhausted.add(cid)
    if (cid is None or not run.audit.enabled or rejection.claimed
            or cid in run.written):  # one updates row per client and round
        return
    run.written.add(cid)
    assert run.identities is not None
    run.identities.seen.add(cid)  # a later reply claiming this client is a duplicate
    status = {"exception": "failed", "declined": "declined"}.get(rejection.kind, "rejected")
    row, report = {"node_id": node}, rejection.report
    if report is not None:
        row = update_row(report, node, report.mechanism.release(run.dim))
    run.store.write_update(rnd, cid, None, {**row, "status": status, "error": rejection.reason})
    if declined and report is not None:  # the tallies stand as they were
        tally = run.ledger.tally(cid, accuracy=run.accuracy(report, run.dim))
        run.store.write_tally(rnd, cid, {**tally, "epsilon_budget": report.epsilon_budget})
