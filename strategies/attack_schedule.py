"""What to attack, how, and how to score it — shared by the live auditor and ``fedpriv audit``.

:class:`AttackPlan` decides which client-rounds are attacked (``audit.attacks``, ``every``,
``clients``: by default ``"rotate"``, one client a round in turn, :meth:`AttackPlan.scheduled`),
runs a round's attacks in the round's turn within its budget (``audit.round_seconds``, tuning
included; the first client always runs; the others the budget leaves out, and any update whose
declared batch × local steps is over :data:`MAX_REPLAYED_RECORDS`, are :attr:`AttackPlan.
skipped`), builds each attack job from the ``[audit]`` settings with seeds derived from (audit
seed, round, client) so an offline re-run reproduces a live one, draws the candidate pools of
the Bayesian-privacy estimate, and turns results into the store's rows. Ground truth reaches
only the scoring here (:func:`attack_scores`) and the estimate; the attacks themselves see a
:class:`~attacks.view.ServerView` only (:mod:`strategies.attack_views`), so ``attacks/`` never
reads the wire protocol. An update without ground truth (the
oracle off, or a stock client's undeclared update) is attacked all the same: its row keeps the
attack, its time and its reconstruction, with no scores (:func:`unscored_row`) and no
Bayesian-privacy estimate (it needs the true batch).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attacks.estimators.bayesian import estimate_bayesian_privacy
from attacks.estimators.game import GameSettings, candidates_log_capacity, identification_game
from attacks.estimators.prior import (
    BASELINES,
    NO_UPDATE,
    PriorBaseline,
    PublicPrior,
    prior_baseline,
    within_class_identification,
)
from attacks.registry import attack_options
from attacks.result import AttackResult
from attacks.runner import AttackJob, run_attacks
from attacks.scoring import guess_scores, score_reconstruction
from attacks.view import ServerView
from fedpriv.audit.config import ROTATE, AuditConfig
from fedpriv.audit.pairing import MAX_MATCH_PAIRS
from fedpriv.data import Dataset
from fedpriv.leakage.game import GAME_ATTACK
from strategies.attack_tuner import Tuner

__all__ = ["MAX_REPLAYED_RECORDS", "AttackPlan", "Outcome", "PendingAttack", "attack_job",
           "attack_scores", "game_outcome", "identification_bound", "public_prior",
           "unscored_row"]

log = logging.getLogger(__name__)
#: Most records an attack's matcher may replay an iteration: the declared batch (the images it
#: reconstructs) × the declared local steps (each replayed). A view over it is not attacked
#: (:meth:`AttackPlan.add`), so no reply's declaration can make the server's default attack
#: allocate or run without bound: the quickstart's is 32 × 20 = 640, ≈ 10 ms an iteration.
MAX_REPLAYED_RECORDS = 2**14
Truth = Callable[[Sequence[int]], tuple[np.ndarray, np.ndarray]]


def public_prior(dataset: Dataset) -> PublicPrior | None:
    """The public data of the prior baselines: the server's held-out evaluation split, which
    the server holds to evaluate the global model (never a client's training records); None
    where the server holds none (a user's own app: attacks there are unscored anyway)."""
    if len(dataset.test_y) == 0:
        return None
    return PublicPrior(dataset.test_x.numpy(), dataset.test_y.numpy())


def attack_job(
    audit: AuditConfig, name: str, view: ServerView, rnd: int, client_id: int, *, run: int = 0,
    device: str = "cpu", tuning: dict[str, Any] | None = None,
) -> AttackJob:
    """The attack ``name`` on a client's update of round ``rnd``, as configured in ``audit``,
    on ``device`` (the run's ``device`` key), with the options ``tuning["chosen"]`` where the
    server tuned them (:class:`strategies.attack_tuner.Tuner`), else the fixed ``audit.tv_weight``.

    Seeded by (audit seed, round, client), so an offline re-run reproduces it; ``run = k ≥ 1``
    is the k-th single-restart run of a Bayesian-privacy estimate.
    """
    seed = audit.seed + 1000 * rnd + client_id + 7919 * run
    fixed = {"tv_weight": audit.tv_weight, "early_stop": audit.early_stop}
    options = {k: v for k, v in fixed.items() if k in attack_options(name)}
    if tuning is not None and tuning.get("chosen"):
        options.update(tuning["chosen"])
    restarts = 1 if run else audit.restarts
    return AttackJob(name, view, audit.iterations, restarts, seed, options=options,
                     device=device, tuning=tuning)


def attack_scores(
    result: AttackResult, images: np.ndarray, labels: np.ndarray, public: PublicPrior | None,
    view: ServerView | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """The ``attacks`` row of a result scored against the true images (privacy-math.md §7), and
    the reconstructions in the truth's order.

    With the ``public`` data the row carries ``prior`` (the label prior's MSE, PSNR, SSIM and
    support SSIM, its name, the no-update prior's scores and the gains over it, the public
    source, and every baseline's scores: :mod:`attacks.estimators.prior`), the gains over the
    label prior ``gain_ssim``, ``gain_psnr`` (score − prior), and ``estimate``: the support SSIM
    and the within-class identification score (:func:`_scores_beyond`); a true image the attack
    returned no reconstruction for is scored, and stored, as the label prior's guess for it.
    Without public data there is no prior (None) and such an image is stored blank and left out
    of the means.
    With the attacked ``view`` the identification score carries its bound, the log Bayes
    capacity of the round's releases on its candidates (:func:`identification_bound`).
    """
    baseline = None if public is None else prior_baseline(images, result.labels, public)
    scored = score_reconstruction(
        result.reconstructions, images, prior=None if baseline is None else baseline.images,
        no_update_prior=None if baseline is None else baseline.guesses[NO_UPDATE],
        recovered_labels=result.labels, true_labels=labels,
    )
    score = scored.summary()
    aligned = np.zeros((len(scored.order), *result.reconstructions.shape[1:]), np.float32)
    if baseline is not None:
        aligned[:] = baseline.images
    matched = scored.order >= 0
    aligned[matched] = result.reconstructions[scored.order[matched]]
    row = {
        "attack": result.attack, "iterations": result.iterations, "restarts": result.restarts,
        "pseudo_gradient": result.pseudo_gradient, "seconds": result.seconds,
        "settings": result.settings,
        **{k: score[k] for k in ("mse", "psnr", "ssim", "best_mse", "best_psnr", "best_ssim",
                                 "label_accuracy", "relative_leakage", "gain_ssim",
                                 "gain_psnr")},
        "prior": None if baseline is None else _prior(score, baseline, public, images),
        "estimate": _scores_beyond(score, result, images, labels, baseline, public, view),
    }  # fmt: skip
    return row, aligned


def identification_bound(view: ServerView, candidates: int) -> float:
    """The identification score's bound: ``log C`` of the round's releases about one record
    among ``candidates``, the rest of the batch fixed (record level, ``r = C``; the Gaussian's
    in the candidates' span; :func:`attacks.estimators.game.candidates_log_capacity`), ``inf``
    where the mechanism gives none. The images of a batch are the score's trials: each is one
    such record, so each one's success probability is at most ``exp(log C)/M``."""
    from fedpriv.mechanisms import build_mechanism

    mechanism = build_mechanism(view.mechanism, view.mechanism_params)
    dim = sum(int(np.size(p)) for p in view.global_params)
    return candidates_log_capacity(mechanism, dim, candidates, view.local_steps)


def _scores_beyond(score: dict[str, Any], result: AttackResult,
                   images: np.ndarray, labels: np.ndarray, baseline: PriorBaseline | None,
                   public: PublicPrior | None, view: ServerView | None) -> dict[str, Any]:
    """The ``estimate`` JSON of a scored attack row: the support SSIM and the within-class
    identification score (None without public data): each true image hidden among public
    look-alikes of its own class, named by the candidate nearest any of the attack's
    reconstructions (the matching to the truth takes no part), and — with the same
    look-alikes — by the label prior's guesses (``prior_successes``: what the labels and the
    public data alone identify).

    The look-alikes are of the true class, not the recovered one: a candidate set drawn from
    the release (a wrongly recovered label) is no identification game — the true image then
    stands out among another class's images, which invents leakage under noise — and the
    capacity bound holds only for candidates fixed before the release."""
    if baseline is None or public is None:
        return {"support_ssim": score["support_ssim"], "identification": None}
    truth = np.clip(np.asarray(images, np.float64), 0.0, 1.0)
    classes = np.asarray(labels, dtype=np.int64)
    found = within_class_identification(np.clip(result.reconstructions, 0.0, 1.0), truth,
                                        classes, public, seed=result.seed)
    identification = None
    if found is not None:
        prior = within_class_identification(np.clip(baseline.images, 0.0, 1.0), truth, classes,
                                            public, seed=result.seed)
        bound = None if view is None else identification_bound(view, found.candidates)
        identification = {**found.summary(),
                          "prior_successes": None if prior is None else prior.successes,
                          "log_capacity": None if bound is None or math.isinf(bound) else bound}
    return {"support_ssim": score["support_ssim"], "identification": identification}


def unscored_row(result: AttackResult) -> dict[str, Any]:
    """The ``attacks`` row of a result with no ground truth to score it against: the attack,
    its settings and time; every score column stays NULL."""
    return {"attack": result.attack, "iterations": result.iterations,
            "restarts": result.restarts, "pseudo_gradient": result.pseudo_gradient,
            "seconds": result.seconds, "settings": result.settings}


def _prior(score: dict[str, Any], baseline: PriorBaseline, public: PublicPrior,
           images: np.ndarray) -> dict[str, Any]:
    """The ``prior`` JSON of an attack row: the label prior's means (the reference), the
    no-update prior's and the gains over it, and every baseline's."""
    every = {}
    for name in BASELINES:
        scores = guess_scores(np.clip(baseline.guesses[name], 0.0, 1.0),
                              np.clip(np.asarray(images, np.float64), 0.0, 1.0))
        every[name] = scores.means()
    no_update_gain = {k: score[f"no_update_gain_{k}"] for k in ("ssim", "psnr", "support_ssim")}
    return {"baseline": baseline.baseline, "mse": score["prior_mse"],
            "psnr": score["prior_psnr"], "ssim": score["prior_ssim"],
            "support_ssim": score["prior_support_ssim"],
            "gain_support_ssim": score["gain_support_ssim"],
            "no_update": every[NO_UPDATE], "no_update_gain": no_update_gain,
            "matched": score["matched"], "batch_size": score["batch_size"],
            "public": public.source, "public_size": len(public.images), "baselines": every,
            "oracle": "pool_oracle picks the public image closest to each true image: an "
                      "upper bound for any guess from the pool, not an attack"}


def game_outcome(
    audit: AuditConfig, rnd: int, client_id: int, view: ServerView,
    batch: tuple[np.ndarray, np.ndarray], pool: tuple[np.ndarray, np.ndarray],
) -> Outcome | None:
    """The identification game on a client's release (privacy-math.md §13), seeded by (audit
    seed, round, client): its ``attacks`` row (``empirical_leakage`` with the p-value of its
    bound, the noise its trials drew, and the MBP/ABP estimates with intervals from the same
    game in ``estimate``) and the tally's estimates. None where it does not apply
    (:func:`attacks.estimators.game.identification_game`). No client-round is flagged here:
    the report flags over all of the run's games at once (Holm, ``audit.game_alpha``)."""
    from fedpriv.mechanisms import build_mechanism

    declared = build_mechanism(view.mechanism, view.mechanism_params)
    settings = GameSettings(audit.game_trials, audit.game_confidence,
                            audit.seed + 1000 * rnd + client_id)
    played = identification_game(view, declared, batch, pool, settings)
    if played is None:
        return None
    game = played.leakage
    leakage = game.summary()
    row = {
        "attack": GAME_ATTACK, "iterations": 0, "restarts": game.trials,
        "mbp_estimate": game.mbp, "abp_estimate": game.abp,
        "estimate": {"empirical_leakage": leakage, "mbp_interval": list(game.mbp_interval),
                     "abp_interval": list(game.abp_interval), "noise": played.noise(),
                     "bound_used": "Bayes capacity on the candidates, min(log C, log M)"},
    }  # fmt: skip
    log.info("round %d client %d game: log(M·P) %s in [%s, %.3g], bound %.3g, p-value %.3g",
             rnd, client_id, leakage["log_value"], leakage["log_lower"], game.log_upper,
             game.log_bound, game.p_value)
    return Outcome(client_id, row, None, {"mbp_estimate": game.mbp, "abp_estimate": game.abp})


@dataclass
class PendingAttack:
    """An update scheduled for attack at the end of its round: the view, the ids of the true
    records (every record the round used, in order of first use; the oracle's) and, for the
    Bayesian-privacy estimate, the candidate pool."""

    client_id: int
    view: ServerView
    truth_ids: list[int]
    pool_ids: list[int] = field(default_factory=list)
    game_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """A store write the plan asks for: an ``attacks`` row (with its reconstruction in truth
    order, if any) and, for an estimate, the tally columns it fills."""

    client_id: int
    row: dict[str, Any]
    reconstruction: np.ndarray | None = None
    tally: dict[str, Any] | None = None


class AttackPlan:
    """The round's attacks.

    Parameters
    ----------
    audit
        The ``[audit]`` settings.
    train_size
        Number of training records (candidate pools draw distractors from them).
    device
        Where the attacks run (the run's ``device`` key).
    public
        The public data the prior baselines use (:mod:`attacks.estimators.prior`); None scores
        no prior.
    num_clients
        The clients of the federation (ids ``0 … num_clients − 1``), which
        ``audit.clients = "rotate"`` takes in turn.
    """

    def __init__(self, audit: AuditConfig, train_size: int, device: str = "cpu",
                 public: PublicPrior | None = None, num_clients: int = 1) -> None:
        self.audit = audit
        self.num_clients = max(1, num_clients)
        self.public = public
        self.train_size = train_size
        self.device = device
        self.tuner = Tuner(audit, public, device)
        self.pending: list[PendingAttack] = []
        self.unattackable: list[int] = []  # this round's views over MAX_REPLAYED_RECORDS
        self.skipped: list[int] = []  # the last run's scheduled clients it did not attack

    def scheduled(self, rnd: int, client_ids: Collection[int]) -> set[int]:
        """Which of the clients that replied in round ``rnd`` are attacked.

        ``audit.clients = "rotate"`` takes one per attacked round, in turn: the ``a``-th
        attacked round (``a = (rnd − 1) // every``) starts at client ``a mod N`` (``N`` =
        ``num_clients``) and takes the first of the round's clients at or after it in id
        order, cyclically. The choice depends on the round number and on who replied only, so
        a resumed run makes it again. Ids are taken mod ``N``: a stock client bound to an id of
        ``N`` or more shares its turn with a lower one (``"all"`` or a list attacks it
        for certain)."""
        audit, ids = self.audit, set(client_ids)
        if not audit.attacks or (rnd - 1) % audit.every or not ids:
            return set()
        if audit.clients == "all":
            return ids
        if audit.clients == ROTATE:
            return {min(ids, key=lambda cid: self._turn(rnd, cid))}
        if isinstance(audit.clients, int):
            return {cid for cid in ids if cid < audit.clients}
        return ids & set(audit.clients)

    def _turn(self, rnd: int, client_id: int) -> tuple[int, int]:
        """The client's place in round ``rnd``'s turn: its distance, in id order and
        cyclically, from the client the round starts at (``a mod N`` in the ``a``-th attacked
        round). Rotation takes the first; a round's attacks run in this order, so the ones a
        spent budget leaves out change from round to round, whatever order replies came in."""
        start = ((rnd - 1) // self.audit.every) % self.num_clients
        return (client_id - start) % self.num_clients, client_id

    def add(self, rnd: int, client_id: int, view: ServerView, truth_ids: Sequence[int]) -> None:
        """Schedule an attack on ``view`` (scored against ``truth_ids``; unscored when empty);
        a view whose declared batch × local steps is over :data:`MAX_REPLAYED_RECORDS` is not
        attacked (:attr:`unattackable`, then :attr:`skipped`), before anything is allocated
        for it."""
        replayed = view.default_num_images * view.local_steps
        if replayed > MAX_REPLAYED_RECORDS:
            log.warning("round %d client %d: not attacked: its declared batch of %d x %d local "
                        "steps would replay %d records an iteration, over the attacks' bound "
                        "of %d", rnd, client_id, view.default_num_images, view.local_steps,
                        replayed, MAX_REPLAYED_RECORDS)
            self.unattackable.append(client_id)
            return
        truth = list(truth_ids)
        pool = self._pool(rnd, client_id, truth) if truth else []
        self.pending.append(PendingAttack(client_id, view, truth, pool,
                                          self._game_pool(rnd, client_id, truth)))

    def _game_pool(self, rnd: int, cid: int, truth: list[int]) -> list[int]:
        """The identification game's ``M − 1`` distractors (privacy-math.md §13), seeded by
        (audit seed, round, client, 13) so a resumed or offline run draws the same."""
        audit = self.audit
        if not audit.game_trials or not truth:
            return []
        others = np.setdiff1d(np.arange(self.train_size), truth)
        k = min(audit.game_candidates - 1, len(others))
        rng = np.random.default_rng([audit.seed, rnd, cid, 13])
        return rng.choice(others, size=k, replace=False).tolist()

    def _pool(self, rnd: int, cid: int, truth: list[int]) -> list[int]:
        """The true batch plus distractors from the rest of the training set (§6), drawn from a
        generator seeded by (audit seed, round, client): a resumed run draws the same."""
        audit = self.audit
        if not audit.bayes_runs:
            return []
        others = np.setdiff1d(np.arange(self.train_size), truth)
        k = min(audit.bayes_distractors, len(others))
        rng = np.random.default_rng([audit.seed, rnd, cid])
        return truth + rng.choice(others, size=k, replace=False).tolist()

    def _jobs(self, rnd: int, deadline: float | None) -> list[tuple[PendingAttack, str, AttackJob]]:
        """The jobs of the pending attacks, each client's tuned first
        (:class:`~strategies.attack_tuner.Tuner`); no client after the first is tuned or given
        jobs once ``deadline`` (``time.monotonic``) has passed."""
        audit, jobs = self.audit, []
        for i, item in enumerate(self.pending):
            if i and deadline is not None and time.monotonic() >= deadline:
                break
            cid = item.client_id
            for name in audit.attacks:
                tuning = self.tuner(name, item.view, rnd)
                jobs.append((item, name, attack_job(audit, name, item.view, rnd, cid,
                                                    device=self.device, tuning=tuning)))
            for k in range(audit.bayes_runs if item.truth_ids else 0):  # K runs of the first
                job = attack_job(audit, audit.attacks[0], item.view, rnd, cid, run=k + 1,
                                 device=self.device,
                                 tuning=self.tuner(audit.attacks[0], item.view, rnd))
                jobs.append((item, "bayes", job))
        return jobs

    def run(self, rnd: int, executor: str, truth: Truth,
            bound: Callable[[int], float]) -> Iterator[Outcome]:
        """Run the pending attacks; yield what to store. ``truth(ids)`` gives the true images
        and labels, ``bound(client)`` the client's MBP bound (the estimate is checked against
        it).

        The round's attacks, their tuning included, keep to ``audit.round_seconds``
        (:func:`attacks.runner.run_attacks`); the clients whose attacks the budget left unrun
        are :attr:`skipped`, with no row, estimate or game of the round."""
        budget = self.audit.round_seconds or None
        deadline = None if budget is None else time.monotonic() + budget
        too_big, self.unattackable = self.unattackable, []
        self.pending.sort(key=lambda item: self._turn(rnd, item.client_id))
        jobs = self._jobs(rnd, deadline)
        pending, self.pending = self.pending, []
        left = None if deadline is None else max(deadline - time.monotonic(), 1e-9)
        lead = sum(item is pending[0] for item, _, _ in jobs) if pending else 0
        results = run_attacks([j for _, _, j in jobs], executor=executor, seconds=left,
                              first=lead)  # the first client's attacks run whatever the budget
        ran: dict[int, bool] = {}  # whether every job of the client ran
        for (item, _, _), result in zip(jobs, results, strict=True):
            ran[item.client_id] = ran.get(item.client_id, True) and result is not None
        spent = [item.client_id for item in pending if not ran.get(item.client_id, False)]
        self.skipped = sorted({*too_big, *spent})
        if spent:
            log.warning("round %d: the round's attack budget (audit.round_seconds = %g s) was "
                        "spent; clients %s are not attacked this round", rnd, budget, spent)
        bayes: dict[int, list[AttackResult]] = {}
        for (item, name, _), result in zip(jobs, results, strict=True):
            if result is None or item.client_id in self.skipped:
                continue
            if name == "bayes":
                bayes.setdefault(item.client_id, []).append(result)
                continue
            if not item.truth_ids:
                log.info("round %d client %d %s: no ground truth, reconstruction kept unscored",
                         rnd, item.client_id, result.attack)
                yield Outcome(item.client_id, unscored_row(result), result.reconstructions)
                continue
            pairs = len(item.truth_ids) * len(result.reconstructions)
            if pairs > MAX_MATCH_PAIRS:  # checked before the truth is loaded
                log.warning("round %d client %d %s: %d reconstructions against %d true images "
                            "is over %d pairs to match; reconstruction kept unscored", rnd,
                            item.client_id, result.attack, len(result.reconstructions),
                            len(item.truth_ids), MAX_MATCH_PAIRS)
                yield Outcome(item.client_id, unscored_row(result), result.reconstructions)
                continue
            images, labels = truth(item.truth_ids)
            row, recon = attack_scores(result, images, labels, self.public, item.view)
            log.info("round %d client %d %s: SSIM %.3f, MSE %.4f", rnd, item.client_id,
                     result.attack, row["ssim"], row["mse"])
            yield Outcome(item.client_id, row, recon)
        for item in pending:  # the game's estimates, else (no game applies) the K runs'
            if item.client_id in self.skipped:
                continue
            game = self._game(rnd, item, truth) if item.game_ids else None
            if game is not None:
                yield game
            elif item.client_id in bayes:
                yield self._estimate(item, bayes[item.client_id], truth, bound(item.client_id))

    def _game(self, rnd: int, item: PendingAttack, truth: Truth) -> Outcome | None:
        return game_outcome(self.audit, rnd, item.client_id, item.view, truth(item.truth_ids),
                            truth(item.game_ids))

    def _estimate(self, item: PendingAttack, runs: list[AttackResult], truth: Truth,
                  bound: float) -> Outcome:
        audit = self.audit
        candidates, _ = truth(item.pool_ids)
        est = estimate_bayesian_privacy(runs, candidates, threshold=audit.bayes_threshold,
                                        smoothing=audit.bayes_smoothing, bound=bound)
        row = {
            "attack": f"{audit.attacks[0]}-bayes", "iterations": audit.iterations,
            "restarts": len(runs), "mbp_estimate": est.mbp, "abp_estimate": est.abp,
            "estimate": {
                "runs": est.runs, "threshold": est.threshold, "pool_size": est.pool_size,
                "smoothing": est.smoothing, "counts": est.counts.tolist(),
                "bound": None if math.isinf(est.bound) else est.bound,
            },
        }  # fmt: skip
        return Outcome(item.client_id, row, None,
                       {"mbp_estimate": est.mbp, "abp_estimate": est.abp})
