"""The honest-but-curious server's auditor: it coordinates the reply check, the store, the
privacy ledger and the attack plan.

For every reply of a round, :func:`strategies.replies.check_reply` says whether it is fit to
aggregate (a rejection is recorded as that client's failure, never raised); for an accepted one
the auditor writes the update Δ = θ_client − θ to the audit store (:mod:`fedpriv.audit`), folds
the client's releases into the :class:`~fedpriv.ledger.PrivacyLedger` — cumulative ε at δ, log
Bayes capacity, MBP/ABP bounds — and schedules the attacks the
:class:`~attacks.plan.AttackPlan` asks for. At the end of the round the plan runs and its scores
are stored (privacy-math.md §1, §3, §5–§7).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np
from flwr.app import Message

from attacks.plan import AttackPlan
from attacks.view import ServerView
from fedpriv.audit import AuditStore
from fedpriv.audit.storage import encode_update, keeps_update
from fedpriv.config import Config
from fedpriv.data import Dataset
from fedpriv.ledger import PrivacyLedger
from fedpriv.protocol import ClientReport
from strategies.replies import AcceptedReply, Rejection, RoundIdentities, check_reply

__all__ = ["Auditor"]

log = logging.getLogger(__name__)


def _update_row(report: ClientReport, node: int, dim: int) -> dict:
    """The store's ``updates`` columns for a report."""
    release = report.build_mechanism().release(dim)
    return {
        "node_id": node, "num_examples": report.local_examples,
        "local_steps": report.local_steps, "lr": report.lr, "batch_size": report.batch_size,
        "sample_rate": report.sample_rate, "mechanism": report.mechanism,
        "mechanism_params": dict(report.mechanism_params),
        "formal_guarantee": release.formal_guarantee,
    }  # fmt: skip


class Auditor:
    """Sees every broadcast and reply of the :class:`~strategies.auditing.AuditingStrategy`.

    Parameters
    ----------
    cfg
        The run's configuration (``[audit]`` says what to tally and attack).
    store
        The run's audit store, opened for writing. With ``audit.enabled = false`` only rounds,
        server accuracy and failures are recorded (no updates, tallies or attacks).
    dataset
        The data set, for ground truth in simulation (scoring only; attacks never see it).
    """

    def __init__(self, cfg: Config, store: AuditStore, dataset: Dataset) -> None:
        audit = cfg.audit
        self.cfg = cfg
        self.store = store
        self.dataset = dataset
        self.ledger = PrivacyLedger(audit.delta, audit.accountant, audit.threat_model)
        self.plan = AttackPlan(audit, len(dataset.train_y), cfg.device)
        self.node_clients: dict[int, int] = {}  # Flower node id -> partition id, as replies tell
        self._round = RoundIdentities.start(cfg.data.num_clients, self.node_clients)
        self._model = (cfg.model.name, dataset.input_shape, dataset.num_classes)
        self._dim = 0

    # -- the round ----------------------------------------------------------------------------

    def begin_round(self, server_round: int, broadcast: Sequence[np.ndarray]) -> None:
        """Open the round in the store and keep θ (attacks offline need it)."""
        self.store.begin_round(server_round)
        if self.cfg.audit.enabled:
            self.store.write_global(server_round, broadcast)
        self.plan.pending = []
        self._dim = int(sum(a.size for a in broadcast))
        self._round = RoundIdentities.start(self.cfg.data.num_clients, self.node_clients)

    def accepted(
        self, server_round: int, replies: Iterable[Message], broadcast: Sequence[np.ndarray]
    ) -> list[AcceptedReply]:
        """Check and record every reply; return the accepted ones in client order (floating
        point sums depend on order; a resumed run must aggregate exactly as an uninterrupted
        one). The round's replies are written in one store transaction."""
        out = []
        with self.store.batch():
            for msg in replies:
                outcome = check_reply(msg, broadcast, self._round)
                if isinstance(outcome, Rejection):
                    self._reject(server_round, outcome)
                else:
                    self._accept(server_round, outcome, broadcast)
                    out.append(outcome)
        return sorted(out, key=lambda r: r.client_id)

    def end_round(self, server_round: int, accuracy: float, loss: float) -> None:
        """Run the round's attacks, then mark the round complete (every record durable)."""
        if self.plan.pending:
            self._run_attacks(server_round)
        self.store.complete_round(server_round, {"accuracy": accuracy, "loss": loss})

    def record_failure(self, server_round: int, kind: str, message: str) -> None:
        """A round-level failure (e.g. the inner strategy refused the accepted replies)."""
        log.warning("round %d: %s: %s", server_round, kind, message)
        self.store.record_failure(server_round, kind, message)

    # -- replies ------------------------------------------------------------------------------

    def _reject(self, rnd: int, rejection: Rejection) -> None:
        node, cid = rejection.node_id, rejection.client_id
        log.warning("round %d: reply from node %d rejected (%s): %s", rnd, node, rejection.kind,
                    rejection.reason)
        self.store.record_failure(rnd, rejection.kind, rejection.reason, client_id=cid,
                                  node_id=node)
        if cid is not None and self.cfg.audit.enabled:
            status = "failed" if rejection.kind == "exception" else "rejected"
            row = {"node_id": node}
            if rejection.report is not None:
                row = _update_row(rejection.report, node, self._dim)
            self.store.write_update(rnd, cid, None, {**row, "status": status,
                                                     "error": rejection.reason})

    def _accept(self, rnd: int, reply: AcceptedReply, broadcast: Sequence[np.ndarray]) -> None:
        if not self.cfg.audit.enabled:  # auditing off: validate and aggregate, record nothing
            return
        report, cid, audit = reply.report, reply.client_id, self.cfg.audit
        delta = [(a - b).astype(np.float32) for a, b in zip(reply.arrays, broadcast, strict=True)]
        dim = sum(a.size for a in delta)
        attacked = self.plan.scheduled(rnd, cid)
        kept = keeps_update(audit.store_updates, attacked)  # the storage policy
        stored = encode_update(delta, audit.update_dtype) if kept else None
        self.store.write_update(rnd, cid, stored, _update_row(report, reply.node_id, dim))
        truth = self._ground_truth(rnd, cid, report) if kept or attacked else []
        tally = self.ledger.fold(
            rnd, cid, report.build_mechanism().release(dim), steps=report.local_steps,
            sample_rate=report.sample_rate, batch_size=report.batch_size, dim=dim,
        )
        self.store.write_tally(rnd, cid, tally)
        if truth and attacked:
            view = ServerView.from_update(self._model, broadcast, delta, report)
            self.plan.add(rnd, cid, view, truth)

    def _ground_truth(self, rnd: int, cid: int, report: ClientReport) -> list[int]:
        """Store what the oracle told (scoring only): every record the round used, in order of
        first use, with images and labels; return their ids (empty without the oracle)."""
        if report.oracle is None:
            return []
        ids = list(dict.fromkeys(i for batch in report.oracle.record_ids for i in batch))
        if any(i >= len(self.dataset.train_y) for i in ids):
            log.warning("round %d client %d: record ids outside the training set ignored",
                        rnd, cid)
            return []
        images, labels = self._truth(ids)
        arrays = {"images": images, "labels": labels} if ids else None
        self.store.write_ground_truth(rnd, cid, ids, arrays)
        return ids

    def restore(self, dim: int) -> None:
        """Rebuild the privacy ledger from the updates of the store's completed rounds
        (``--resume``): the same releases folded in the same order give the same tallies."""
        from fedpriv.mechanisms import build_mechanism

        for update in self.store.iter_updates():
            if update.status == "ok":
                mechanism = build_mechanism(str(update.mechanism), update.mechanism_params)
                self.ledger.fold(update.round, update.client_id, mechanism.release(dim),
                                 steps=int(update.local_steps),
                                 sample_rate=float(update.sample_rate),
                                 batch_size=float(update.batch_size), dim=dim)

    # -- attacks ------------------------------------------------------------------------------

    def _truth(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        ids = list(ids)
        return self.dataset.train_x[ids].numpy(), self.dataset.train_y[ids].numpy()

    def _executor(self) -> str:
        """Ray only when a CPU is free beside the client actors (else tasks would wait forever)."""
        if self.cfg.audit.executor != "ray":
            return "inline"
        import ray

        if ray.is_initialized() and ray.available_resources().get("CPU", 0.0) < 1.0:
            log.warning("audit.executor = 'ray' but no Ray CPU is free; attacking inline")
            return "inline"
        return "ray"

    def _run_attacks(self, rnd: int) -> None:
        for outcome in self.plan.run(rnd, self._executor(), self._truth, self.ledger.mbp_bound):
            if outcome.tally is not None:
                self.store.write_tally(rnd, outcome.client_id, outcome.tally)
            images = None if outcome.reconstruction is None else {"images": outcome.reconstruction}
            self.store.write_attack(rnd, outcome.client_id, outcome.row, images)
