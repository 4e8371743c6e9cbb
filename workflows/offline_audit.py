"""Offline auditing: attack the updates an audit store holds, after (or while) the run goes.

For each selected update — status ``ok`` or ``undeclared``, in a completed round, its arrays
kept by the run's storage policy (``audit.store_updates``; the others are listed under
``not_stored`` and named in a warning, and a selection with none stored is refused) — the
server's view is rebuilt from the store alone: the θ broadcast that round (``load_global``),
the update Δ and the client's stored report (learning rate, expected batch size, local steps,
mechanism), the same report the live auditor read
(:func:`strategies.attack_views.declared_view`); an undeclared update (a stock client's, no
report) is read with the run's ``[train]`` settings, as live
(:func:`strategies.attack_views.undeclared_view`). The
attacks run through :func:`attacks.runner.run_attacks` with the live auditor's settings and
seeds (:func:`strategies.attack_schedule.attack_job`, ``--iterations`` aside), are scored
against the stored ground truth where the run kept one (every record of that round, as the live
auditor scores), and are written to the store's ``attacks`` table; then the report is rebuilt.
The store's verification is the usual one: a missing or altered tensor file, or a damaged
database, is a :class:`fedpriv.audit.StoreError` naming the file.

A run made with canaries stores each update as received, canaries in: the attacks see it with
the canaries' share removed, as the live auditor's attacks do. ``canaries=True``
(``fedpriv audit RUN --canaries``) recomputes the ε lower bounds from the stored updates —
accepted and inconsistent ones, pooled per client over the selected rounds — with the run's
``audit.canaries`` settings or another method or confidence, and writes them to the tallies'
``epsilon_lower`` (the live verdicts stay as they were).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attacks.estimators.prior import PublicPrior
from attacks.runner import run_attacks
from attacks.view import ServerView
from fedpriv.audit import (
    DB_NAME,
    AuditStore,
    StoreError,
    UpdateRecord,
    check_intact,
    verify,
    write_report,
)
from fedpriv.audit.config import AuditConfig
from fedpriv.config import Config
from fedpriv.data import SHAPES
from fedpriv.errors import InputError
from fedpriv.schema import apply_override
from strategies.attack_schedule import (
    attack_job,
    attack_scores,
    game_outcome,
    public_prior,
    unscored_row,
)
from strategies.attack_tuner import Tuner
from strategies.attack_views import declared_view, undeclared_view
from strategies.canary_audit import CanaryAuditor
from strategies.server_run import dataset_of
from workflows.config import config_from_dict
from workflows.ray_session import ray_session

__all__ = ["audit_run"]

log = logging.getLogger(__name__)
Rounds = tuple[int | None, int | None]


def _selected(
    store: AuditStore, cfg: Config, rounds: Rounds, clients: Sequence[int] | None,
    statuses: tuple[str, ...] = ("ok",),
) -> tuple[list[UpdateRecord], list[UpdateRecord]]:
    """Updates of completed rounds in ``rounds`` (inclusive, open ends) and ``clients``
    (None: all) with one of ``statuses`` (default: accepted): those whose arrays are stored,
    and those the run's storage policy did not keep. InputError if none is stored."""
    low, high = rounds
    chosen = [
        u for u in store.iter_updates(clients=clients)
        if u.status in statuses and (low is None or u.round >= low)
        and (high is None or u.round <= high)
    ]  # fmt: skip
    stored = [u for u in chosen if u.stored]
    skipped = [u for u in chosen if not u.stored]
    if skipped:
        log.warning("%d selected updates were not stored (audit.store_updates = %r): not "
                    "attacked: %s", len(skipped), cfg.audit.store_updates,
                    ", ".join(f"round {u.round} client {u.client_id}" for u in skipped[:10])
                    + (", ..." if len(skipped) > 10 else ""))
    if not stored:
        done = store.completed_rounds()
        why = (f"; {len(skipped)} accepted updates selected, none stored: the run kept "
               f"audit.store_updates = {cfg.audit.store_updates!r}") if skipped else ""
        raise InputError(
            "--rounds" if rounds != (None, None) else "--clients",
            f"rounds {low}:{high}, clients {'all' if clients is None else list(clients)}",
            f"a selection holding stored accepted updates (completed rounds: {done}{why})",
        )
    return stored, skipped


def _view(store: AuditStore, cfg: Config, update: UpdateRecord) -> ServerView:
    """What the server saw of ``update``, from the store alone (no ground truth), with any
    canaries' share removed."""
    input_shape, num_classes = SHAPES[cfg.data.name]  # never the store's data.root
    arrays = list(store.load_update(update.update_id).values())
    if update.report is None:  # undeclared: a stock client's update, no report
        return undeclared_view((cfg.model.name, input_shape, num_classes),
                               list(store.load_global(update.round).values()), arrays, cfg.train)
    clean = CanaryAuditor(cfg.audit, cfg.seed).without_canaries(
        update.round, update.client_id, update.report, arrays)
    return declared_view(
        (cfg.model.name, input_shape, num_classes),
        list(store.load_global(update.round).values()),
        arrays if clean is None else clean,
        update.report,
    )


def _canary_bounds(
    store: AuditStore, cfg: Config, rounds: Rounds, clients: Sequence[int] | None,
    method: str | None, confidence: float | None,
) -> list[dict[str, Any]]:
    """Recompute and store every selected client-round's ``epsilon_lower``; one summary each."""
    if not cfg.audit.canaries.enabled:
        raise InputError("--canaries", str(store.run_dir),
                         "a run made with audit.canaries.enabled = true")
    raw = cfg.to_dict()
    for key, value in (("method", method), ("confidence", confidence)):
        if value is not None:  # validated as the run's config is (gdp-* for Gaussian only)
            apply_override(raw, f"audit.canaries.{key}", value)
    auditor = CanaryAuditor(config_from_dict(raw).audit, cfg.seed)
    out = []
    for update in _selected(store, cfg, rounds, clients, ("ok", "inconsistent"))[0]:
        flat = np.concatenate([a.ravel() for a in store.load_update(update.update_id).values()])
        canary = auditor.score(update.round, update.client_id, update.report, flat)
        if canary is None:
            continue
        store.write_tally(update.round, update.client_id, {"epsilon_lower": canary.lower})
        own = canary.lower["round"]
        out.append({"round": update.round, "client_id": update.client_id,
                    "epsilon_lower": own["value"], "epsilon_formal": own["epsilon_formal"],
                    "status": own["status"], "pooled": canary.lower["value"],
                    "pooled_formal": canary.lower["epsilon_formal"]})
    return out


def _public(cfg: Config) -> PublicPrior | None:
    """The run's public data for the prior baselines (the evaluation split), or None, logged,
    where this machine does not have the data set: the attacks are then scored without a
    prior."""
    try:
        return public_prior(dataset_of(cfg))
    except InputError as exc:
        log.warning("no public data for the prior baselines (%s): scored without a prior", exc)
        return None


def _record(store: AuditStore, update: UpdateRecord, result: Any,
            public: PublicPrior | None, view: ServerView) -> dict[str, Any]:
    """Score ``result`` against the stored true batch if any (its identification score bounded
    as live, from ``view``), write it, return its summary."""
    try:
        truth = store.load_ground_truth(update.round, update.client_id)
    except KeyError:
        truth = None
    if truth is None or "images" not in truth or "labels" not in truth:
        row, recon = unscored_row(result), result.reconstructions
    else:
        row, recon = attack_scores(result, truth["images"], truth["labels"], public, view)
    attack_id = store.write_attack(update.round, update.client_id, row, {"images": recon})
    return {"attack_id": attack_id, "round": update.round, "client_id": update.client_id,
            "scored": "ssim" in row, **row}  # fmt: skip


def audit_run(
    run_dir: Path | str,
    *,
    attacks: Sequence[str] | None = None,
    rounds: Rounds = (None, None),
    clients: Sequence[int] | None = None,
    iterations: int | None = None,
    executor: str = "inline",
    progress: bool = True,
    canaries: bool = False,
    canary_method: str | None = None,
    canary_confidence: float | None = None,
) -> dict[str, Any]:
    """Attack the selected stored updates (and/or recompute their canary bounds), store the
    results, rebuild the report.

    Parameters
    ----------
    run_dir
        A run directory (``fedpriv simulate --out``).
    attacks
        Attack names (default: the run's ``audit.attacks``, else ``["iga"]``).
    rounds
        ``(first, last)`` round, inclusive; None leaves that end open.
    clients
        Client (partition) ids; None for all.
    iterations
        Optimiser iterations per restart (default: the run's ``audit.iterations``).
    executor
        ``"inline"`` or ``"ray"`` (:func:`attacks.runner.run_attacks`).
    canaries
        Recompute the ε lower bounds from the canaries (module docstring); then attacks run
        only when ``attacks`` names some.
    canary_method, canary_confidence
        Override the run's ``audit.canaries.method`` / ``confidence``.

    Returns
    -------
    dict
        ``run_dir``, ``attacks`` (one summary per attack run: round, client, scores),
        ``games`` (one identification game per selected update with a stored true batch:
        its ``attacks`` row, ``empirical_leakage`` in ``estimate``),
        ``canaries`` (with ``canaries=True``: per client-round the round's bound, the canary's
        formal ε, the status and the bound pooled so far), ``not_stored`` (round and client of
        each selected accepted update whose arrays the run's ``audit.store_updates`` did not
        keep: not attacked), ``clients`` (the rebuilt report's per-client entries) and
        ``files``.

    Raises
    ------
    InputError
        An empty selection or a bad attack setting; :class:`fedpriv.audit.StoreError` for a
        missing, damaged or foreign store or tensor file, or a broken record (its hash chain).
    """
    check_intact(run_dir)  # a broken record is refused before any work
    with AuditStore.open(run_dir) as store:
        try:
            cfg = config_from_dict(store.run_info()["config"])
            out: dict[str, Any] = {"run_dir": str(store.run_dir), "attacks": [],
                                   "games": [], "not_stored": []}
            if canaries:
                out["canaries"] = _canary_bounds(store, cfg, rounds, clients, canary_method,
                                                 canary_confidence)
            if attacks or not canaries:
                out["attacks"], out["games"], skipped = _attack(
                    store, cfg, attacks, rounds, clients, iterations, executor, progress)
                out["not_stored"] = [{"round": u.round, "client_id": u.client_id}
                                     for u in skipped]
            report = write_report(store, problems=verify(store.run_dir, hashes=False))
        except sqlite3.DatabaseError as exc:
            raise StoreError(store.run_dir / DB_NAME, f"corrupt database ({exc})") from None
    return {**out, "clients": report["clients"], "files": report["files"]}


def _attack(
    store: AuditStore, cfg: Config, attacks: Sequence[str] | None, rounds: Rounds,
    clients: Sequence[int] | None, iterations: int | None, executor: str, progress: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[UpdateRecord]]:
    """Run the attacks and the identification games on the selected stored updates; their
    summaries, and the selected updates the storage policy did not keep."""
    audit = cfg.audit
    if iterations is not None:
        audit = dataclasses.replace(audit, iterations=iterations)
    names = list(attacks or audit.attacks or ["iga"])
    stored, skipped = _selected(store, cfg, rounds, clients, ("ok", "undeclared"))
    views = [(update, _view(store, cfg, update)) for update in stored]  # read each once
    public = _public(cfg)
    tuner = Tuner(audit, public, cfg.device)  # on the public data, as live
    jobs = [
        (update, view, attack_job(audit, name, view, update.round, update.client_id,
                                  device=cfg.device, tuning=tuner(name, view, update.round)))
        for update, view in views for name in names
    ]  # fmt: skip
    log.info("attacking %d stored updates with %s", len(jobs) // len(names), names)
    with ray_session({}) if executor == "ray" else contextlib.nullcontext():  # our SIGTERM
        results = run_attacks([job for _, _, job in jobs], executor=executor, progress=progress)
    summaries = [
        _record(store, update, result, public, view)
        for (update, view, _), result in zip(jobs, results, strict=True)
    ]
    return summaries, _games(store, audit, views), skipped


def _true_records(store: AuditStore) -> dict[tuple[int, int], tuple[list, np.ndarray, np.ndarray]]:
    """Every stored true batch: (round, client) → (record ids, images, labels)."""
    out = {}
    for row in store.query("SELECT round, client_id, record_ids_json FROM ground_truth"):
        try:
            arrays = store.load_ground_truth(row["round"], row["client_id"])
        except KeyError:
            continue
        if "images" in arrays and "labels" in arrays:
            out[(row["round"], row["client_id"])] = (
                json.loads(row["record_ids_json"]), arrays["images"], arrays["labels"])
    return out


def _games(
    store: AuditStore, audit: AuditConfig, views: list[tuple[UpdateRecord, ServerView]]
) -> list[dict[str, Any]]:
    """The identification game (privacy-math.md §13) on every selected update whose true batch
    the store holds. Offline the distractors are the run's other stored true records (the
    live game draws them from the whole training set; the store holds no more), drawn with
    the live seeds; the report flags over all of the run's games (Holm), as live."""
    truths = _true_records(store) if audit.game_trials else {}
    out = []
    for update, view in views:
        own = truths.get((update.round, update.client_id))
        if own is None:
            continue
        ids, images, labels = own
        pool: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
        for other_ids, x, y in truths.values():
            for j, rid in enumerate(other_ids):
                if rid not in ids:
                    pool.setdefault(rid, (x[j], y[j]))
        if not pool:
            continue
        keys = sorted(pool, key=str)
        rng = np.random.default_rng([audit.seed, update.round, update.client_id, 13])
        pick = rng.choice(len(keys), size=min(audit.game_candidates - 1, len(keys)),
                          replace=False)
        chosen = [pool[keys[i]] for i in pick]
        outcome = game_outcome(audit, update.round, update.client_id, view, (images, labels),
                               (np.stack([c[0] for c in chosen]),
                                np.array([c[1] for c in chosen])))
        if outcome is None:
            continue
        attack_id = store.write_attack(update.round, update.client_id, outcome.row)
        out.append({"attack_id": attack_id, "round": update.round,
                    "client_id": update.client_id, "scored": False, **outcome.row})
    return out
