"""The honest-but-curious server's audit pipeline: it coordinates the reply check, the store, the
privacy ledger and the attack plan.

For every reply of a round, :func:`strategies.replies.check_reply` says whether it is fit to
aggregate (a rejection is recorded as that client's failure, never raised); for an accepted one
the auditor writes the update Δ = θ_client − θ to the audit store (:mod:`fedpriv.audit`), folds
the client's releases into the :class:`~fedpriv.ledger.PrivacyLedger` — cumulative ε at δ, log
Bayes capacity, MBP/ABP bounds — and schedules the attacks the
:class:`~strategies.attack_schedule.AttackPlan` asks for. At the end of the round the plan runs
and its scores are stored (privacy-math.md §1, §3, §5–§7). With canaries on, the
:class:`~strategies.canary_audit.CanaryAuditor` first removes the canaries' share of each update
and bounds ε from below; its verdict joins the verification (§10).

An undeclared reply (no report: a stock Flower client, docs/protocol.md) is stored with status
``undeclared``, tallied with no guarantee (ε, log C and the MBP bound infinite:
:meth:`~fedpriv.ledger.PrivacyLedger.fold_undeclared`), attacked when scheduled — its update as
a pseudo-gradient, read with the run's ``[train]`` settings as the server's only guess of the
client's learning rate, steps and batch size — and aggregated.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Sequence

import numpy as np
from flwr.app import Message
from threadpoolctl import threadpool_limits

from fedpriv.audit import AuditStore
from fedpriv.audit.config import AuditConfig
from fedpriv.audit.errors import StoreError
from fedpriv.audit.reader import DB_NAME
from fedpriv.audit.storage import encode_update, keeps_update
from fedpriv.config import Config
from fedpriv.data import Dataset
from fedpriv.leakage.robustness import pac_robust_confidence
from fedpriv.ledger import PrivacyLedger
from fedpriv.protocol import ClientReport
from fedpriv.training.config import TrainConfig
from fedpriv.verification import Verdict, combine_verdicts, with_preconditions
from fedpriv.verification.observed import NoiseObservation, round_observation
from fedpriv.verification.replay import UpdateSketches
from fedpriv.verification.update import flatten
from strategies.attack_schedule import AttackPlan, declared_view, public_prior, undeclared_view
from strategies.canary_audit import CanaryAuditor, with_arrays
from strategies.identity import NodeBinding, known_checks, node_binding, weigh_replies
from strategies.replies import UNDECLARED, AcceptedReply, Rejection, RoundIdentities, check_reply
from strategies.reply_verdicts import (
    fold_verdicts,
    fresh_noise,
    observe_reply,
    recovered_reply,
    update_row,
    verdict_line,
    verdict_summary,
    verified_or_inconsistent,
)
from strategies.step_releases import (
    canary_step_share,
    first_step_truth,
    first_step_view,
    strip_steps,
    verify_step_reply,
)

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
        checked against the settings it instructs (:func:`strategies.identity.known_checks`).
        None for an app whose clients the server does not instruct (``strategies/audited.py``).
    weighting, weight_cap
        ``strategy.weighting`` and ``strategy.weight_cap``: the aggregation weight of a size
        the server cannot verify (:func:`strategies.identity.aggregation_weights`).
    """

    def __init__(self, audit: AuditConfig, store: AuditStore, dataset: Dataset, *, model: str,
                 num_clients: int, seed: int, device: str,
                 train: TrainConfig | None = None, config: Config | None = None,
                 weighting: str = "capped", weight_cap: float = 1.0) -> None:
        self.audit = audit
        self.config = config
        self.binding = NodeBinding()  # first claim until bind() learns better
        self.weighting = (weighting, weight_cap)
        self.unverified_share: float | None = None  # of the round's weight (weigh_replies)
        self.train = TrainConfig() if train is None else train
        self.num_clients = num_clients
        self.seed = seed
        self.store = store
        self.dataset = dataset
        self.ledger = PrivacyLedger(audit.delta, audit.accountant, audit.threat_model,
                                    audit.pac_beta, audit.neighbouring)
        self.exhausted: set[int] = set()  # clients that declined for their ε budget
        self.plan = AttackPlan(audit, len(dataset.train_y), device, public_prior(dataset))
        self.node_clients: dict[int, int] = {}  # Flower node id -> partition id, as replies tell
        self._round = RoundIdentities.start(num_clients, self.node_clients)
        self._written: set[int] = set()  # clients with an updates row this round
        self._model = (model, dataset.input_shape, dataset.num_classes)
        self._dim = 0
        self._sketches: UpdateSketches | None = None  # replayed updates (verification/replay)
        self._theta: tuple[object, np.ndarray, float] = (None, np.empty(0), 0.0)  # θ, flat, ‖θ‖
        self.canaries = CanaryAuditor(audit, seed)

    # -- the round ----------------------------------------------------------------------------

    def begin_round(self, server_round: int, broadcast: Sequence[np.ndarray]) -> None:
        """Open the round in the store and keep θ (attacks offline need it)."""
        self.store.begin_round(server_round)
        if self.audit.enabled:
            self.store.write_global(server_round, broadcast)
        self.plan.pending, self.unverified_share = [], None
        self._dim = int(sum(a.size for a in broadcast))
        self._round = RoundIdentities.start(
            self.num_clients, self.node_clients,
            self.binding.clients if self.binding.bound else None)
        self._written: set[int] = set()

    def bind(self, grid: object) -> None:
        """Bind nodes to clients from what the server knows (:func:`strategies.identity.
        node_binding`: the simulation engine, ``[[strategy.nodes]]``, else first claim); with
        the run's config only (an app of its own binds by first claim)."""
        if self.config is not None:
            self.binding = node_binding(grid, self.config, self.dataset)
        log.info("nodes bound to clients by: %s", self.binding.source)

    def accepted(
        self, server_round: int, replies: Iterable[tuple[int, Message]],
        broadcast: Sequence[np.ndarray], names: Sequence[str] | None = None,
    ) -> list[AcceptedReply]:
        """Check and record every ``(node, reply)`` against θ (and its array ``names``, when
        given); return the accepted ones in client order (floating point sums depend on order;
        a resumed run must aggregate exactly as an uninterrupted one). The round's replies are
        written in one store transaction, and checked with one BLAS thread: each reply's
        vectors are ~10⁴ floats, where a threaded BLAS call (``np.linalg.norm``, a QR) costs
        milliseconds of thread hand-offs on cores the clients keep busy, against ~10 µs alone
        (measured: a Gaussian reply's verification 7.8 ms with OpenBLAS's 2 threads on a busy
        2-core machine, 0.36 ms with one)."""
        out = []
        with self.store.batch(), threadpool_limits(limits=1, user_api="blas"):
            for node, msg in replies:
                outcome = check_reply(msg, broadcast, self._round, node=node, names=names,
                                      undeclared=self.audit.undeclared,
                                      steps=self.audit.release == "steps")
                if isinstance(outcome, Rejection):
                    self._reject(server_round, outcome)
                    continue
                strip_steps(outcome.message)  # the inner strategy aggregates the update alone
                if self._accept(server_round, outcome, broadcast):
                    out.append(outcome)
        out, self.unverified_share = weigh_replies(
            server_round, sorted(out, key=lambda r: r.client_id), self.binding, self.weighting)
        return out

    def end_round(self, server_round: int, accuracy: float, loss: float) -> None:
        """Run the round's attacks, then mark the round complete (every record durable)."""
        if self.plan.pending:
            self._run_attacks(server_round)
        self.store.complete_round(server_round, {"accuracy": accuracy, "loss": loss,
                                                 "unverified_share": self.unverified_share})

    def record_silence(self, server_round: int, node: int) -> None:
        """A node that was sent a train message and never answered (timeout, lost node)."""
        cid = self.node_clients.get(node)
        message = "no reply within strategy.round_timeout"
        log.warning("round %d: node %d (client %s): %s", server_round, node, cid, message)
        self.store.record_failure(server_round, "timeout", message, client_id=cid, node_id=node)
        if cid is not None and self.audit.enabled and cid not in self._written:
            self._written.add(cid)
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
        return self.node_clients.get(node_id) not in self.exhausted

    def releases(self) -> dict[int, int]:
        """Releases accounted per client so far (a floor for a client that lost its own count,
        e.g. on ``--resume``: ``clients/budget.py``)."""
        return {cid: ledger.releases for cid, ledger in self.ledger.clients.items()}

    # -- replies ------------------------------------------------------------------------------

    def _reject(self, rnd: int, rejection: Rejection) -> None:
        node, cid = rejection.node_id, rejection.client_id
        declined = rejection.kind == "declined"
        log.log(logging.INFO if declined else logging.WARNING,
                "round %d: reply from node %d rejected (%s): %s", rnd, node, rejection.kind,
                rejection.reason)
        self.store.record_failure(rnd, rejection.kind, rejection.reason, client_id=cid,
                                  node_id=node)
        if declined and cid is not None:
            self.exhausted.add(cid)
        if (cid is not None and self.audit.enabled and not rejection.claimed
                and cid not in self._written):  # one updates row per client and round
            self._written.add(cid)
            self._round.seen.add(cid)  # a later reply claiming this client is a duplicate
            status = {"exception": "failed", "declined": "declined"}.get(rejection.kind, "rejected")
            row, report = {"node_id": node}, rejection.report
            if report is not None:
                row = update_row(report, node, report.mechanism.release(self._dim))
            self.store.write_update(rnd, cid, None, {**row, "status": status,
                                                     "error": rejection.reason})
            if declined and report is not None:  # the tallies stand as they were
                accuracy = self._accuracy(report, self._dim)
                tally = self.ledger.tally(cid, accuracy=accuracy)
                self.store.write_tally(rnd, cid, {**tally, "epsilon_budget": report.epsilon_budget})

    def _unaccountable(self, rnd: int, cid: int, report: ClientReport, dim: int) -> str | None:
        """Why the run cannot account what the report declares (None: it can), asked before
        anything of the reply is stored, scored or folded: the ledger with this round's
        releases (:meth:`~fedpriv.ledger.PrivacyLedger.unaccountable`: the run's accountant
        over the client's history, its capacity and bounds, the PAC accuracy) and, with
        canaries, the round's canary ε (:meth:`CanaryAuditor.unaccountable`)."""
        try:
            release = report.mechanism.release(dim)
            self._accuracy(report, dim)
        except Exception as exc:  # noqa: BLE001 - a declaration the tally cannot read
            return f"{type(exc).__name__}: {exc}"
        return (self.ledger.unaccountable(
            cid, release, steps=report.releases, **report.release_sampling,
            batch_size=report.secret_batch, dim=dim, unit=report.mechanism.level)
            or self.canaries.unaccountable(rnd, cid, report, dim))

    def _accuracy(self, report: ClientReport, dim: int) -> float | None:
        """PAC accuracy α of one release of the declared mechanism at ``audit.pac_beta``;
        the divisor is ``q·n`` (= min(L, n)), as in training."""
        return report.mechanism.pac_accuracy(self.ledger.pac_beta, dim, report.divisor)

    def _accept(self, rnd: int, reply: AcceptedReply, broadcast: Sequence[np.ndarray]) -> bool:
        """Record an accepted reply: verify it against its declaration, store it, fold it into
        the ledger, schedule its attacks. Return whether it may be aggregated (not when it
        contradicts its declaration)."""
        if not self.audit.enabled:  # auditing off: validate and aggregate, record nothing
            return True
        if reply.report is None:
            self._accept_undeclared(rnd, reply, broadcast)
            return True
        report, cid, audit = reply.report, reply.client_id, self.audit
        if report.oracle is not None and any(
            i >= len(self.dataset.train_y) for batch in report.oracle.record_ids for i in batch
        ):
            self._reject(rnd, Rejection(reply.node_id, cid, "malformed", "malformed reply: reply "
                                        "field 'record-ids': outside the training set", report))
            return False
        dim = int(sum(a.size for a in reply.arrays))
        unaccounted = self._unaccountable(rnd, cid, report, dim)
        if unaccounted is not None:
            self._reject(rnd, Rejection(reply.node_id, cid, "unaccountable",
                                        f"unaccountable declaration: {unaccounted}", report))
            return False
        self._written.add(cid)
        delta = [(a - b).astype(np.float32) for a, b in zip(reply.arrays, broadcast, strict=True)]
        flat = np.concatenate([d.ravel() for d in delta])
        clean = self.canaries.without_canaries(rnd, cid, report, reply.arrays)
        arrays = reply.arrays if clean is None else clean
        canary = self.canaries.score(rnd, cid, report, flat)
        share = None if reply.releases is None else canary_step_share(
            self.canaries.design(rnd, cid, report.mechanism, dim), report)
        sketches = self._sketches_of(dim)
        replayed = sketches.replay_of(cid, flat)
        observation: NoiseObservation | str = "not observable: a replayed update"
        if replayed is not None:
            verdict = Verdict("replay", "inconsistent",
                              f"the update repeats this client's update of round {replayed}",
                              p_value=0.0, speaks_to=("fresh-noise",))
        else:  # recovered once: verified (in steps mode recomposed, then every step tested),
            theta, theta_norm = self._flat_theta(broadcast)  # observed, tested for fresh noise
            recovered = recovered_reply(report, theta, arrays)
            verdict = (verified_or_inconsistent(report, theta, arrays, audit.verify_alpha,
                                                recovered) if reply.releases is None else
                       verify_step_reply(report, broadcast, reply.arrays, reply.releases,
                                         audit.verify_alpha, share))
            observation = observe_reply(report, recovered)
            fresh = fresh_noise(self._sketches_of(flat.size), cid, report, flat, theta_norm,
                                audit.verify_alpha)
            if fresh is not None:  # can refute the round, never verify it: a precondition
                verdict = with_preconditions(verdict, [fresh])
        if canary is not None:
            verdict = combine_verdicts([dataclasses.replace(verdict, test="update"),
                                        canary.verdict])
        verdict = with_preconditions(  # what the server knows: settings, size, identity
            verdict, known_checks(self.config, self.binding, rnd, reply.node_id, report))
        summary = verdict_summary(verdict, report.mechanism.level)
        release = report.mechanism.release(dim)
        try:  # asked beforehand (_unaccountable): a surprise here is still the client's alone
            tally = self.ledger.fold(
                rnd, cid, release, steps=report.releases, **report.release_sampling,
                batch_size=report.secret_batch, dim=dim, **fold_verdicts(summary),
                accuracy=self._accuracy(report, dim), unit=report.mechanism.level,
                observation=observation)
        except Exception as exc:  # noqa: BLE001 - the fold is all or nothing (PrivacyLedger)
            self._written.discard(cid)
            self._reject(rnd, Rejection(reply.node_id, cid, "unaccountable",
                                        "unaccountable declaration: the tally fails: "
                                        f"{type(exc).__name__}: {exc}", report))
            return False
        consistent = verdict.status != "inconsistent"
        if consistent:  # remembered in the store too: --resume rebuilds it (restore)
            self.store.write_memory(rnd, cid, "sketch", sketches.add(rnd, cid, flat))
        if canary is not None:
            self.store.write_memory(rnd, cid, "canaries", canary.memory)
        row = update_row(report, reply.node_id, release)
        if not consistent:
            row.update(status="inconsistent", error=verdict.reason)
            self.store.record_failure(rnd, "inconsistent", verdict_line(verdict),
                                      client_id=cid, node_id=reply.node_id)
            log.warning("round %d client %d: %s", rnd, cid, verdict_line(verdict))
        attacked = self.plan.scheduled(rnd, cid)
        kept = keeps_update(audit.store_updates, attacked)  # the storage policy
        stored = encode_update(delta, audit.update_dtype) if kept else None
        self.store.write_update(rnd, cid, stored, row)
        truth = self._ground_truth(rnd, cid, report) if kept or attacked else []
        lower = None if canary is None else canary.lower
        self.store.write_tally(rnd, cid, {**tally, "verification": summary,
                                          "epsilon_lower": lower,
                                          "epsilon_budget": report.epsilon_budget})
        if attacked:  # scored against the oracle's truth, or kept unscored without it
            own = delta if clean is None else [a - b for a, b in zip(clean, broadcast, strict=True)]
            view = declared_view(self._model, broadcast, own, report)
            if reply.releases is not None:  # the first step's release alone (threat model)
                view = first_step_view(self._model, broadcast, reply.releases, report, share)
                truth = first_step_truth(report) if truth else truth
            self.plan.add(rnd, cid, view, truth)
        if clean is not None:
            with_arrays(reply.message, clean)  # aggregate without the canaries
        return consistent

    def _accept_undeclared(
        self, rnd: int, reply: AcceptedReply, broadcast: Sequence[np.ndarray]
    ) -> None:
        """Record an update that came without a report: stored (by the storage policy) with
        status ``undeclared``, tallied with no guarantee, attacked when scheduled (unscored:
        no oracle reports on it)."""
        cid, audit = reply.client_id, self.audit
        self._written.add(cid)
        delta = [(a - b).astype(np.float32) for a, b in zip(reply.arrays, broadcast, strict=True)]
        attacked = self.plan.scheduled(rnd, cid)
        kept = keeps_update(audit.store_updates, attacked)
        self.store.write_update(  # num-examples as claimed: an integer in [1, 2^63 - 1]
            rnd, cid, encode_update(delta, audit.update_dtype) if kept else None,
            {"node_id": reply.node_id, "num_examples": int(reply.weight), "formal_guarantee": False,
             "pseudo_gradient": True, "status": "undeclared"})
        verdict = Verdict("declaration", "undeclared", UNDECLARED)
        self.store.write_tally(rnd, cid, {**self.ledger.fold_undeclared(rnd, cid),
                                          "verification": verdict_summary(verdict)})
        if attacked:
            self.plan.add(rnd, cid, undeclared_view(self._model, broadcast, delta, self.train),
                          [])

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

    def _flat_theta(self, broadcast: Sequence[np.ndarray]) -> tuple[np.ndarray, float]:
        """θ flattened to float64 (read-only: the verification keeps its norms) and its ℓ2 norm,
        once per broadcast instead of once per reply."""
        if self._theta[0] is not broadcast:
            flat = flatten(broadcast)
            flat.flags.writeable = False
            self._theta = (broadcast, flat, float(np.linalg.norm(flat)))
        return self._theta[1], self._theta[2]

    def _sketches_of(self, dim: int) -> UpdateSketches:
        if self._sketches is None:
            self._sketches = UpdateSketches(dim, self.seed)
        return self._sketches

    def _ground_truth(self, rnd: int, cid: int, report: ClientReport) -> list[int]:
        """Store what the oracle told (scoring only): every record the round used, in order of
        first use, with images and labels; return their ids (empty without the oracle)."""
        if report.oracle is None:
            return []
        ids = list(dict.fromkeys(i for batch in report.oracle.record_ids for i in batch))
        images, labels = self._truth(ids)
        arrays = {"images": images, "labels": labels} if ids else None
        self.store.write_ground_truth(rnd, cid, ids, arrays)
        return ids

    def restore(self, dim: int) -> None:
        """Rebuild what the audit remembers from the store's completed rounds (``--resume``):
        the privacy ledger from the updates (the same releases folded in the same order give
        the same tallies), the node ↔ client bindings from the updates rows, and the replay
        sketches and canary pools from the ``memory`` rows — under every storage policy,
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
                    self._sketches_of(dim).remember(rnd, cid, state)
                elif kind == "canaries":
                    self.canaries.remember(rnd, cid, state)
            except ValueError as exc:  # written for another model, or altered
                raise StoreError(self.store.run_dir / DB_NAME, f"memory row ({kind}, round "
                                 f"{rnd}, client {cid}): {exc}") from None

    # -- attacks ------------------------------------------------------------------------------

    def _truth(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        ids = list(ids)
        return self.dataset.train_x[ids].numpy(), self.dataset.train_y[ids].numpy()

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
        for outcome in self.plan.run(rnd, self._executor(), self._truth, self.ledger.mbp_bound):
            if outcome.tally is not None:
                self.store.write_tally(rnd, outcome.client_id, self._with_pac(outcome.tally))
            images = None if outcome.reconstruction is None else {"images": outcome.reconstruction}
            self.store.write_attack(rnd, outcome.client_id, outcome.row, images)
