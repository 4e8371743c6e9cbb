"""The honest-but-curious server's audit pipeline: it holds the run's audit state (the store,
the privacy ledger, the attack plan, the canary auditor: :class:`~strategies.stages.base.
RunState`) and runs each round's replies, as one batch, through the ordered stages of
:data:`strategies.stages.STAGES` — conform, accountable, update, canaries, verification, fresh
noise, identity and size, ledger fold, store write, attack schedule (privacy-math.md §1, §3,
§5–§7, §10). A rejection is recorded as that client's failure, never raised. At the end of the
round the plan runs and its scores are stored.

An undeclared reply (no report: a stock Flower client, docs/protocol.md) is stored with status
``undeclared``, tallied with no guarantee (ε, log C and the MBP bound infinite:
:meth:`~fedpriv.ledger.PrivacyLedger.fold_undeclared`), attacked when scheduled — its update as
a pseudo-gradient, read with the run's ``[train]`` settings as the server's only guess of the
client's learning rate, steps and batch size — and aggregated.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import Message
from threadpoolctl import threadpool_limits

from fedpriv.audit import AuditStore
from fedpriv.audit.config import AuditConfig
from fedpriv.audit.errors import StoreError
from fedpriv.audit.reader import DB_NAME
from fedpriv.config import Config
from fedpriv.data import Dataset
from fedpriv.failures import log_first
from fedpriv.leakage.robustness import pac_robust_confidence
from fedpriv.ledger import PrivacyLedger
from fedpriv.training.config import TrainConfig
from fedpriv.verification.observed import round_observation
from strategies import stages
from strategies.attack_schedule import AttackPlan, public_prior
from strategies.canary_audit import CanaryAuditor
from strategies.identity import node_binding, weigh_replies
from strategies.replies import AcceptedReply, RoundIdentities
from strategies.reply_verdicts import fold_verdicts
from strategies.sensitivity_replay import MEMORY_KIND, SensitivityReplay
from strategies.stages import Reply, Round, RunState

__all__ = ["AuditPipeline"]

log = logging.getLogger(__name__)


class AuditPipeline:
    """Sees every broadcast and reply of the :class:`~strategies.auditing.AuditingStrategy`.

    Parameters
    ----------
    audit
        The run's ``[audit]`` section: what to tally and attack.
    store
        The run's audit store, opened for writing. With ``audit.enabled = false`` only rounds,
        server accuracy and failures are recorded (no updates, tallies or attacks).
    dataset
        The data set, for ground truth in simulation (scoring only; attacks never see it).
    model
        The model's name (``model.name``), which attacks rebuild.
    num_clients
        ``data.num_clients``: the partition ids a reply may claim.
    seed
        The run's seed (canary designs, update sketches).
    device
        Where attacks run (``device``).
    train
        The run's ``[train]`` section: what the server assumes of an undeclared client's
        training (learning rate, local steps, batch size) when it attacks its update.
    config
        The run's config as the server sends it to every client: then each declared reply is
        checked against the settings it instructs (:class:`strategies.identity.KnownChecks`).
        None for an app whose clients the server does not instruct (``strategies/audited.py``).
    weighting, weight_cap
        ``strategy.weighting`` and ``strategy.weight_cap``: the aggregation weight of a size
        the server cannot verify (:func:`strategies.identity.aggregation_weights`).
    """

    def __init__(self, audit: AuditConfig, store: AuditStore, dataset: Dataset, *, model: str,
                 num_clients: int, seed: int, device: str,
                 train: TrainConfig | None = None, config: Config | None = None,
                 weighting: str = "capped", weight_cap: float = 1.0) -> None:
        ledger = PrivacyLedger(audit.delta, audit.accountant, audit.threat_model, audit.pac_beta,
                               audit.neighbouring)
        plan = AttackPlan(audit, len(dataset.train_y), device, public_prior(dataset),
                          num_clients)
        self.run = RunState(audit, store, ledger, plan, CanaryAuditor(audit, seed), dataset,
                            (model, dataset.input_shape, dataset.num_classes),
                            TrainConfig() if train is None else train, seed, config)
        self.audit, self.store, self.ledger, self.plan = audit, store, ledger, plan
        self.canaries = self.run.canaries
        self.weighting = (weighting, weight_cap)
        self.unverified_share: float | None = None  # of the round's weight (weigh_replies)
        self.num_clients = num_clients
        self.node_clients: dict[int, int] = {}  # Flower node id -> partition id, as replies tell
        self.run.identities = RoundIdentities.start(num_clients, self.node_clients)
        self.run.replay = SensitivityReplay.for_run(audit, dataset, self.run.model, config)

    # -- the round ----------------------------------------------------------------------------

    def begin_round(self, server_round: int, broadcast: Sequence[np.ndarray]) -> None:
        """Open the round in the store and keep θ (attacks offline need it)."""
        self.store.begin_round(server_round)
        if self.audit.enabled:
            self.store.write_global(server_round, broadcast)
        self.plan.pending, self.plan.unattackable, self.unverified_share = [], [], None
        run = self.run
        run.dim = int(sum(a.size for a in broadcast))
        run.identities = RoundIdentities.start(
            self.num_clients, self.node_clients, run.binding.clients if run.binding.bound else None)
        run.written = set()

    def bind(self, grid: object) -> None:
        """Bind nodes to clients from what the server knows (:func:`strategies.identity.
        node_binding`: the simulation engine, ``[[strategy.nodes]]``, else first claim); with
        the run's config only (an app of its own binds by first claim)."""
        if self.run.config is not None:
            self.run.binding = node_binding(grid, self.run.config, self.run.dataset)
        log.info("nodes bound to clients by: %s", self.run.binding.source)

    def accepted(
        self, server_round: int, replies: Iterable[tuple[int, Message]],
        broadcast: Sequence[np.ndarray], names: Sequence[str] | None = None,
    ) -> list[AcceptedReply]:
        """Check and record every ``(node, reply)`` against θ (and its array ``names``, when
        given) through the round's stages (:func:`strategies.stages.run_round`:
        :data:`~strategies.stages.STAGES` in order, each over the batch); return the accepted
        ones in client order (floating point sums depend on order; a resumed run must
        aggregate exactly as an uninterrupted one). The round's replies are written in one
        store transaction, and checked with one BLAS thread: each reply's vectors are ~10⁴
        floats, where a threaded BLAS call (``np.linalg.norm``, a QR) costs milliseconds of
        thread hand-offs on cores the clients keep busy, against ~10 µs alone (measured: a
        Gaussian reply's verification 7.8 ms with OpenBLAS's 2 threads on a busy 2-core
        machine, 0.36 ms with one)."""
        batch = [Reply(node, msg) for node, msg in replies]
        rnd = Round(server_round, broadcast, names, self.run)
        with (stages.paused_gc(), self.store.batch(),
              threadpool_limits(limits=1, user_api="blas")):
            stages.run_round(batch, rnd, audit=self.audit.enabled)
        out = [r.accepted for r in stages.base.live(batch) if r.consistent]
        out, self.unverified_share = weigh_replies(
            server_round, sorted(out, key=lambda r: r.client_id), self.run.binding,
            self.weighting, self.run.logged)
        return out

    def end_round(self, server_round: int, accuracy: float, loss: float,
                  metrics: Mapping[str, Any] | None = None) -> None:
        """Run the round's attacks, then mark the round complete (every record durable);
        ``metrics`` adds to the round's (Flower's DP wrappers: ``strategies/flower_dp.py``)."""
        skipped: list[int] = []
        if self.plan.pending or self.plan.unattackable:
            self._run_attacks(server_round)
            skipped = self.plan.skipped
        self.store.complete_round(server_round, {"accuracy": accuracy, "loss": loss,
                                                 "unverified_share": self.unverified_share,
                                                 **({"attacks_skipped": skipped} if skipped
                                                    else {}),
                                                 **(metrics or {})})

    def record_silence(self, server_round: int, node: int) -> None:
        """A node that was sent a train message and never answered (timeout, lost node)."""
        cid = self.node_clients.get(node)
        message = "no reply within strategy.round_timeout"
        log_first(log, self.run.logged, node, "timeout", message,
                  "round %d: node %d (client %s): %s", server_round, node, cid, message)
        self.store.record_failure(server_round, "timeout", message, client_id=cid, node_id=node)
        if cid is not None and self.audit.enabled and cid not in self.run.written:
            self.run.written.add(cid)
            self.store.write_update(server_round, cid, None, {"node_id": node, "status": "failed",
                                                              "error": message})

    def record_failure(self, server_round: int, kind: str, message: str) -> None:
        """A round-level failure (e.g. the inner strategy refused the accepted replies)."""
        log.warning("round %d: %s: %s", server_round, kind, message)
        self.store.record_failure(server_round, kind, message)

    def sampled(self, server_round: int, count: int) -> None:
        """The inner strategy sampled ``count`` of the ``num_clients`` clients this round: the
        client rate of the client-level ε against the aggregate (:mod:`fedpriv.ledger`)."""
        if count > 0:
            self.ledger.sampled(server_round, count, self.num_clients)

    # -- budgets ------------------------------------------------------------------------------

    def selectable(self, node_id: int) -> bool:
        """Whether the node may be sent a train message: not a client that declined for its
        ε budget (a node not yet heard from always may)."""
        return self.node_clients.get(node_id) not in self.run.exhausted

    def releases(self) -> dict[int, int]:
        """Releases accounted per client so far (a floor for a client that lost its own count,
        e.g. on ``--resume``: ``clients/budget.py``)."""
        return {cid: ledger.releases for cid, ledger in self.ledger.clients.items()}

    def _with_pac(self, tally: dict) -> dict:
        """An estimate's tally columns, with Theorem 4.3 at the MBP *estimate* in ``details``
        (``pac_estimate``: empirical, not a guarantee; the ``pac_robust_confidence`` column is
        the theorem at the bound)."""
        if tally.get("mbp_estimate") is None:
            return tally
        beta = self.ledger.pac_beta
        pac = pac_robust_confidence(tally["mbp_estimate"], beta)
        return {**tally, "details": {"pac_estimate": {"eps_mbp": tally["mbp_estimate"],
                                                      "beta": beta, **pac.as_dict()}}}

    def restore(self, dim: int) -> None:
        """Rebuild what the audit remembers from the store's completed rounds (``--resume``):
        the privacy ledger from the updates (the same releases folded in the same order give
        the same tallies), the node ↔ client bindings from the updates rows, and the replay
        sketches, canary pools and the replay's cross-round evidence (``sensitivity-rounds``)
        from the ``memory`` rows — under every storage policy,
        exactly the memory of an uninterrupted run."""
        for row in self.store.query("SELECT round, COUNT(DISTINCT client_id) AS sent FROM "
                                    "updates GROUP BY round"):  # clients sent a train message
            self.ledger.sampled(row["round"], row["sent"], self.num_clients)
        rows = self.store.query("SELECT round, client_id, verification_json, "
                                "epsilon_observed_json FROM tallies WHERE verification_json "
                                "IS NOT NULL")
        verdicts = {(r["round"], r["client_id"]): json.loads(r["verification_json"])
                    for r in rows}
        observed = {(r["round"], r["client_id"]): round_observation(
            json.loads(r["epsilon_observed_json"] or "null")) for r in rows}
        for update in self.store.iter_updates():
            report = update.report
            if update.node_id is not None:  # every row's node was bound to its client
                self.node_clients[int(update.node_id)] = update.client_id
            if update.status == "undeclared":
                self.ledger.fold_undeclared(update.round, update.client_id)
                continue
            if update.status not in ("ok", "inconsistent") or report is None:
                continue
            summary = verdicts.get((update.round, update.client_id)) or {}
            self.ledger.fold(update.round, update.client_id, report.mechanism.release(dim),
                             steps=report.releases, **report.release_sampling,
                             batch_size=report.secret_batch, dim=dim, **fold_verdicts(summary),
                             unit=report.mechanism.level,
                             observation=observed.get((update.round, update.client_id)))
        for rnd, cid, kind, state in self.store.iter_memory():
            try:
                if kind == "sketch":
                    self.run.sketches_of(dim).remember(rnd, cid, state)
                elif kind == "canaries":
                    self.canaries.remember(rnd, cid, state)
                elif kind == MEMORY_KIND and self.run.replay is not None:
                    self.run.replay.remember(cid, state)
            except ValueError as exc:  # written for another model, or altered
                raise StoreError(self.store.run_dir / DB_NAME, f"memory row ({kind}, round "
                                 f"{rnd}, client {cid}): {exc}") from None

    # -- attacks ------------------------------------------------------------------------------

    def _executor(self) -> str:
        """Ray only when a CPU is free beside the client actors (else tasks would wait forever)."""
        if self.audit.executor != "ray":
            return "inline"
        import ray

        if ray.is_initialized() and ray.available_resources().get("CPU", 0.0) < 1.0:
            log.warning("audit.executor = 'ray' but no Ray CPU is free; attacking inline")
            return "inline"
        return "ray"

    def _run_attacks(self, rnd: int) -> None:
        for outcome in self.plan.run(rnd, self._executor(), self.run.truth, self.ledger.mbp_bound):
            if outcome.tally is not None:
                self.store.write_tally(rnd, outcome.client_id, self._with_pac(outcome.tally))
            images = None if outcome.reconstruction is None else {"images": outcome.reconstruction}
            self.store.write_attack(rnd, outcome.client_id, outcome.row, images)
