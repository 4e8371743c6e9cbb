"""The honest-but-curious server's ledger: what each client released, and what it leaked.

For every reply the :class:`Auditor` recovers the update Δ = θ_client − θ, writes it to the
audit store (:mod:`fedpriv.audit`), and updates that client's tallies — cumulative ε at δ from
its own accountant (its own q and T), the record- or batch-level log Bayes capacity, and the
maximum/average Bayesian-privacy bounds. At the end of a round it runs the scheduled
gradient-inversion attacks on the stored updates, scores them against the ground truth (which
reaches only the scorer) and, if configured, estimates Bayesian privacy empirically
(privacy-math.md §1, §3, §5–§7).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Message

from attacks.bayes_estimate import estimate_bayesian_privacy
from attacks.result import AttackResult
from attacks.runner import AttackJob, run_attacks
from attacks.scoring import score_reconstruction
from attacks.view import ServerView
from fedpriv.accounting import ClientAccountant
from fedpriv.audit import AuditStore
from fedpriv.config import AuditConfig, Config
from fedpriv.data import Dataset
from fedpriv.leakage.bayesian import abp_bound
from fedpriv.leakage.capacity import secret_radius
from fedpriv.mechanisms import Mechanism, build_mechanism

__all__ = ["Auditor", "attack_job", "attack_scores"]

log = logging.getLogger(__name__)


def attack_job(
    audit: AuditConfig, name: str, view: ServerView, rnd: int, client_id: int, *,
    run: int = 0,
) -> AttackJob:
    """The attack ``name`` on a client's update of round ``rnd``, as configured in ``audit``.

    Seeded by (audit seed, round, client), so an offline re-run reproduces it; ``run = k ≥ 1``
    is the k-th single-restart run of a Bayesian-privacy estimate.
    """
    seed = audit.seed + 1000 * rnd + client_id + 7919 * run
    options = {"tv_weight": audit.tv_weight} if name == "iga" else {}
    restarts = 1 if run else audit.restarts
    return AttackJob(name, view, audit.iterations, restarts, seed, options=options)


def attack_scores(
    result: AttackResult, images: np.ndarray, labels: np.ndarray
) -> tuple[dict[str, Any], np.ndarray]:
    """The ``attacks`` row of a result scored against the true batch (privacy-math.md §7),
    and the reconstructions in the order matched to it."""
    scored = score_reconstruction(
        result.reconstructions, images, prior=result.prior,
        recovered_labels=result.labels, true_labels=labels,
    )
    score = scored.summary()
    row = {
        "attack": result.attack, "iterations": result.iterations, "restarts": result.restarts,
        "pseudo_gradient": result.pseudo_gradient, "seconds": result.seconds,
        **{k: score[k] for k in ("mse", "psnr", "ssim", "best_mse", "best_psnr", "best_ssim",
                                 "label_accuracy", "relative_leakage")},
    }  # fmt: skip
    aligned = np.zeros((len(scored.order), *result.reconstructions.shape[1:]), np.float32)
    matched = scored.order >= 0  # a true image left without a reconstruction stays blank
    aligned[matched] = result.reconstructions[scored.order[matched]]
    return row, aligned


@dataclass
class ClientLedger:
    """One client's running totals (cumulative over every release it made)."""

    accountant: ClientAccountant
    releases: int = 0
    log_capacity: float = 0.0
    mbp_bound: float = 0.0


@dataclass
class PendingAttack:
    """An update scheduled for attack at the end of its round."""

    client_id: int
    view: ServerView
    truth_ids: list[int]
    pool_ids: list[int] = field(default_factory=list)


class Auditor:
    """Receives every broadcast and reply from :class:`~strategies.auditing.AuditingFedAvg`.

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
        self.cfg = cfg
        self.store = store
        self.dataset = dataset
        self.ledgers: dict[int, ClientLedger] = {}
        self.pending: list[PendingAttack] = []
        self.node_clients: dict[int, int] = {}  # Flower node id -> partition id, as replies tell

    # -- the round ----------------------------------------------------------------------------

    def begin_round(self, server_round: int, broadcast: list[np.ndarray]) -> None:
        """Open the round in the store and keep θ (attacks offline need it)."""
        self.store.begin_round(server_round)
        if self.cfg.audit.enabled:
            self.store.write_global(server_round, broadcast)
        self.pending = []

    def on_reply(self, server_round: int, msg: Message, broadcast: list[np.ndarray]) -> bool:
        """Record one reply; return whether it may be aggregated (well-formed, finite arrays
        and weight, right shapes). A failed or rejected reply is recorded, never raised."""
        node = int(msg.metadata.src_node_id)
        if msg.has_error():
            cid = self.node_clients.get(node)
            return self._fail(server_round, cid, node, "exception", str(msg.error.reason))
        try:
            meta, cid, local, weight, fields = self._parse(msg, node)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            cid = self.node_clients.get(node)
            return self._fail(server_round, cid, node, "malformed", f"malformed reply: {exc!r}")
        self.node_clients[node] = cid
        if [a.shape for a in local] != [b.shape for b in broadcast]:
            got = [tuple(a.shape) for a in local]
            return self._fail(server_round, cid, node, "shape", f"update shapes {got}", fields)
        if not (all(np.isfinite(a).all() for a in local) and math.isfinite(weight)):
            message = "update or num-examples holds NaN/inf"
            return self._fail(server_round, cid, node, "non-finite", message, fields)
        if weight <= 0:
            message = f"num-examples = {weight}"
            return self._fail(server_round, cid, node, "malformed", message, fields)
        if not self.cfg.audit.enabled:  # auditing off: validate and aggregate, record nothing
            return True
        delta = [(a - b).astype(np.float32) for a, b in zip(local, broadcast, strict=True)]
        self.store.write_update(server_round, cid, delta, fields)
        truth = self._ground_truth(server_round, cid, meta)
        self._tally(server_round, cid, meta, sum(a.size for a in delta))
        if self._scheduled(server_round, cid) and truth:
            self._schedule(server_round, cid, meta, broadcast, delta, truth)
        return True

    def end_round(self, server_round: int, accuracy: float, loss: float) -> None:
        """Run the round's attacks, then mark the round complete (every record durable)."""
        if self.pending:
            self._run_attacks(server_round)
        self.store.complete_round(server_round, {"accuracy": accuracy, "loss": loss})

    # -- replies ------------------------------------------------------------------------------

    def _parse(self, msg: Message, node: int) -> tuple[Any, int, list[np.ndarray], float, dict]:
        """``(meta, client id, arrays, FedAvg weight, update-row fields)`` of a reply shaped as
        the ClientApp sends it (one ArrayRecord, one MetricRecord, a ``meta`` ConfigRecord)."""
        content = msg.content
        if len(content.array_records) != 1 or len(content.metric_records) != 1:
            raise ValueError("expected exactly one ArrayRecord and one MetricRecord")
        meta = content["meta"]
        weight = float(content["metrics"]["num-examples"])
        local = content["arrays"].to_numpy_ndarrays()
        return meta, int(meta["partition-id"]), local, weight, self._update_meta(meta, node)

    def _fail(
        self, rnd: int, cid: int | None, node: int, kind: str, message: str,
        fields: dict[str, Any] | None = None,
    ) -> bool:
        log.warning("round %d: reply from node %d rejected (%s): %s", rnd, node, kind, message)
        self.store.record_failure(rnd, kind, message, client_id=cid, node_id=node)
        if cid is not None and self.cfg.audit.enabled:
            status = "failed" if kind == "exception" else "rejected"
            row = {**(fields or {"node_id": node}), "status": status, "error": message}
            self.store.write_update(rnd, cid, None, row)
        return False

    @staticmethod
    def _update_meta(meta: Any, node: int) -> dict[str, Any]:
        return {
            "node_id": node,
            "num_examples": int(meta["local-examples"]),
            "local_steps": int(meta["steps"]),
            "lr": float(meta["lr"]),
            "batch_size": float(meta["batch-size"]),
            "sample_rate": float(meta["sample-rate"]),
            "mechanism": str(meta["mechanism"]),
            "mechanism_params": json.loads(str(meta["mechanism-params"])),
            "formal_guarantee": bool(meta["formal-guarantee"]),
        }

    def _ground_truth(self, rnd: int, cid: int, meta: Any) -> list[int]:
        """Store the true batch (scoring only); return the record ids of the first step."""
        if "record-ids" not in meta:
            return []
        batches: list[list[int]] = json.loads(str(meta["record-ids"]))
        ids = sorted({i for batch in batches for i in batch})
        images = self.dataset.train_x[ids].numpy() if ids else None
        arrays = None if images is None else {
            "images": images, "labels": self.dataset.train_y[ids].numpy()
        }
        self.store.write_ground_truth(rnd, cid, ids, arrays)
        return batches[0] if batches else []

    # -- tallies ------------------------------------------------------------------------------

    def _mechanism(self, meta: Any) -> Mechanism:
        return build_mechanism(str(meta["mechanism"]), json.loads(str(meta["mechanism-params"])))

    def restore(self, dim: int) -> None:
        """Rebuild every client's ledger from the updates of the store's completed rounds
        (``--resume``): the same releases folded in the same order give the same tallies."""
        for update in self.store.iter_updates():
            if update.status == "ok":
                mech = build_mechanism(str(update.mechanism), update.mechanism_params)
                self._fold(update.client_id, mech, int(update.local_steps),
                           float(update.sample_rate), float(update.batch_size), dim)

    def _fold(
        self, cid: int, mech: Mechanism, steps: int, q: float, batch_size: float, dim: int
    ) -> tuple[ClientLedger, float]:
        """Add one round's ``steps`` releases to the client's ledger; return it and the
        round's log capacity."""
        audit = self.cfg.audit
        ledger = self.ledgers.setdefault(cid, ClientLedger(ClientAccountant(audit.accountant)))
        ledger.accountant.record(mech.name, mech.params(), q, steps, dim=dim)
        radius = (  # none: no clipping, so no bounded secret set
            secret_radius(mech.sensitivity, audit.threat_model, batch_size)
            if math.isfinite(mech.sensitivity) else math.inf
        )
        round_capacity = steps * mech.log_bayes_capacity(dim, radius)
        ledger.releases += steps
        ledger.log_capacity += round_capacity
        ledger.mbp_bound += steps * mech.pure_ldp_epsilon(radius)
        return ledger, round_capacity

    def _tally(self, rnd: int, cid: int, meta: Any, dim: int) -> None:
        """Fold this round's releases into the client's cumulative ε, log C and ξ."""
        audit = self.cfg.audit
        steps, q = int(meta["steps"]), float(meta["sample-rate"])
        ledger, round_capacity = self._fold(
            cid, self._mechanism(meta), steps, q, float(meta["batch-size"]), dim
        )
        acct = ledger.accountant.result(audit.delta)
        self.store.write_tally(rnd, cid, {
            "epsilon": acct.epsilon, "delta": audit.delta, "accountant": acct.accountant,
            "route": acct.route, "optimal_order": acct.optimal_order, "compose": "per-step",
            "releases": ledger.releases, "log_capacity_round": round_capacity,
            "log_capacity_cumulative": ledger.log_capacity, "threat_model": audit.threat_model,
            "mbp_bound": ledger.mbp_bound, "abp_bound": abp_bound(ledger.mbp_bound),
        })  # fmt: skip

    # -- attacks ------------------------------------------------------------------------------

    def _scheduled(self, rnd: int, cid: int) -> bool:
        audit = self.cfg.audit
        if not audit.attacks or (rnd - 1) % audit.every:
            return False
        if audit.clients == "all":
            return True
        if isinstance(audit.clients, int):
            return cid < audit.clients
        return cid in audit.clients

    def _schedule(
        self, rnd: int, cid: int, meta: Any, broadcast: list[np.ndarray],
        delta: list[np.ndarray], truth: list[int],
    ) -> None:
        view = ServerView(
            model_name=self.cfg.model.name,
            input_shape=self.dataset.input_shape,
            num_classes=self.dataset.num_classes,
            global_params=broadcast,
            update=delta,
            learning_rate=float(meta["lr"]),
            batch_size=float(meta["batch-size"]),
            local_steps=int(meta["steps"]),
            mechanism=str(meta["mechanism"]),
            mechanism_params=json.loads(str(meta["mechanism-params"])),
        )
        pool = self._candidate_pool(rnd, cid, truth)
        self.pending.append(PendingAttack(cid, view, truth, pool))

    def _candidate_pool(self, rnd: int, cid: int, truth: list[int]) -> list[int]:
        """The true batch plus distractors drawn from the rest of the training set (§6), from
        a generator seeded by (audit seed, round, client): a resumed run draws the same."""
        audit = self.cfg.audit
        if not audit.bayes_runs:
            return []
        others = np.setdiff1d(np.arange(len(self.dataset.train_y)), truth)
        k = min(audit.bayes_distractors, len(others))
        rng = np.random.default_rng([audit.seed, rnd, cid])
        return truth + rng.choice(others, size=k, replace=False).tolist()

    def _jobs(self, rnd: int) -> list[tuple[PendingAttack, str, AttackJob]]:
        audit = self.cfg.audit
        jobs = []
        for item in self.pending:
            cid = item.client_id
            for name in audit.attacks:
                jobs.append((item, name, attack_job(audit, name, item.view, rnd, cid)))
            for k in range(audit.bayes_runs):  # K independent runs of the first attack
                job = attack_job(audit, audit.attacks[0], item.view, rnd, cid, run=k + 1)
                jobs.append((item, "bayes", job))
        return jobs

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
        jobs = self._jobs(rnd)
        results = run_attacks([j for _, _, j in jobs], executor=self._executor())
        bayes: dict[int, list[Any]] = {}
        for (item, name, _), result in zip(jobs, results, strict=True):
            if name == "bayes":
                bayes.setdefault(item.client_id, []).append(result)
                continue
            self._score(rnd, item, result)
        for item in self.pending:
            if item.client_id in bayes:
                self._estimate(rnd, item, bayes[item.client_id])

    def _truth(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return self.dataset.train_x[ids].numpy(), self.dataset.train_y[ids].numpy()

    def _score(self, rnd: int, item: PendingAttack, result: Any) -> None:
        images, labels = self._truth(item.truth_ids)
        n = len(result.reconstructions)
        images, labels = images[:n], labels[:n]  # a Poisson batch larger than L: first L records
        row, recon = attack_scores(result, images, labels)
        self.store.write_attack(rnd, item.client_id, row, {"images": recon})
        log.info("round %d client %d %s: SSIM %.3f, MSE %.4f", rnd, item.client_id,
                 result.attack, row["ssim"], row["mse"])

    def _estimate(self, rnd: int, item: PendingAttack, runs: list[Any]) -> None:
        audit = self.cfg.audit
        ledger = self.ledgers[item.client_id]
        candidates, _ = self._truth(item.pool_ids)
        est = estimate_bayesian_privacy(
            runs, candidates, threshold=audit.bayes_threshold,
            smoothing=audit.bayes_smoothing, bound=ledger.mbp_bound,
        )
        self.store.write_tally(rnd, item.client_id, {
            "mbp_estimate": est.mbp, "abp_estimate": est.abp,
        })
        self.store.write_attack(rnd, item.client_id, {
            "attack": f"{audit.attacks[0]}-bayes", "iterations": audit.iterations,
            "restarts": len(runs), "mbp_estimate": est.mbp, "abp_estimate": est.abp,
            "estimate": {
                "runs": est.runs, "threshold": est.threshold, "pool_size": est.pool_size,
                "smoothing": est.smoothing, "counts": est.counts.tolist(),
                "bound": None if math.isinf(est.bound) else est.bound,
            },
        })  # fmt: skip
