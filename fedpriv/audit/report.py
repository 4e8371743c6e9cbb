"""The run report, rebuilt from an audit store at any time (also while the run goes).

Only completed rounds count; an incomplete last round is listed and otherwise ignored.
:func:`build_report` returns the ``simulate`` JSON object of the command-line contract
(``docs/audit-store.md`` lists every key); :func:`write_report` writes it as
``report.json`` next to ``tallies.csv`` (one row per client per round), PNG grids
``reconstructions_round<r>.png`` and, once the run is over or when asked, the self-contained
page ``report.html`` (:mod:`fedpriv.audit.html_report`). Values not measured are ``None``
(JSON ``null``).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from fedpriv.atomic import DIR_MODE, atomic_write_bytes, make_dirs_durable
from fedpriv.audit.errors import StoreError
from fedpriv.audit.figures import Panel, write_grid
from fedpriv.audit.gallery import attack_views, load_pairing
from fedpriv.audit.identity import identity_summary
from fedpriv.audit.pairing import NO_TRUTH
from fedpriv.audit.report_attack import FLAT_SCORE_KEYS, attack_scores_summary, flat_scores
from fedpriv.audit.report_central import annotate_clients, central_block, round_metrics
from fedpriv.audit.report_game import client_game, game_family
from fedpriv.audit.report_trust import (
    epsilon_bounds,
    observed_summary,
    properties_summary,
    run_verification_summary,
    verification_summary,
)
from fedpriv.audit.signing import head_summary
from fedpriv.audit.storage import storage_summary
from fedpriv.audit.store import DB_NAME, AuditStore
from fedpriv.audit.vacuity import vacuous_bounds
from fedpriv.audit.verify import Problem, verify
from fedpriv.errors import InputError
from fedpriv.jsonio import dumps, optional_loads
from fedpriv.leakage.game import GAME_ATTACK
from fedpriv.validate import check_out_dir

__all__ = [
    "MAX_PANELS", "REPORT_HTML", "REPORT_JSON", "TALLIES_CSV", "build_report", "report_run",
    "write_report",
]  # fmt: skip

REPORT_HTML = "report.html"
REPORT_JSON = "report.json"
TALLIES_CSV = "tallies.csv"
#: Clients shown per round's figure: the most leaking ones (highest SSIM) first.
MAX_PANELS = 12
_CUMULATIVE = ("epsilon", "delta", "accountant", "route", "optimal_order", "compose", "releases",
               "sampling", "unit", "neighbouring", "epsilon_central", "central_sampling",
               "central_neighbouring", "client_rate")
_ATTACK_KEYS = (
    "attack_id", "round", "iterations", "restarts", "mse", "psnr", "ssim", "best_mse",
    "best_psnr", "best_ssim", "label_accuracy", "relative_leakage", "mbp_estimate",
    "abp_estimate", "seconds",
)  # fmt: skip
log = logging.getLogger(__name__)
Row = dict[str, Any]


def _completed(store: AuditStore, table: str) -> list[Row]:
    """Rows of ``table`` in completed rounds (plus run-level rows whose round is NULL)."""
    return store.query(
        f"SELECT x.* FROM {table} x LEFT JOIN rounds r ON r.round = x.round "
        "WHERE r.status = 'completed' OR x.round IS NULL ORDER BY x.round, x.client_id, x.rowid"
    )


def _by_client(rows: Iterable[Row]) -> dict[int, list[Row]]:
    grouped: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        if row["client_id"] is not None:
            grouped[row["client_id"]].append(row)
    return grouped



def _best(attacks: list[Row]) -> Row | None:
    """The attack with the highest SSIM (the earliest among equals; None-SSIM ones last)."""
    attacks = [a for a in attacks if a["attack"] != GAME_ATTACK]
    if not attacks:
        return None
    return max(attacks, key=lambda a: (a["ssim"] is not None, a["ssim"] or 0.0, -a["attack_id"]))


def _attack_summary(attack: Row | None, tallies: list[Row] | None = None) -> Row | None:
    """The attack's report entry; ``tallies`` (the client's) give its round's bound."""
    if attack is None:
        return None
    summary = {"name": attack["attack"], **{k: attack[k] for k in _ATTACK_KEYS}}
    pseudo = attack["pseudo_gradient"]
    summary["pseudo_gradient"] = None if pseudo is None else bool(pseudo)
    summary["estimate"] = optional_loads(attack["estimate_json"])
    summary["settings"] = optional_loads(attack["settings_json"])
    return {**summary, **attack_scores_summary(attack, _tally_of(attack, tallies or []))}


def _tally_of(attack: Row, tallies: list[Row]) -> Row | None:
    return next((t for t in tallies if t.get("round") == attack["round"]), None)


def _worst(key: str, rows: Iterable[Row]) -> float | None:
    values = [row[key] for row in rows if row[key] is not None]
    return max(values) if values else None


def _per_round(updates: list[Row], tallies: list[Row], attacks: list[Row],
               game: Callable[[list[Row]], Row]) -> list[Row]:
    status = {u["round"]: u["status"] for u in updates}
    tally = {t["round"]: t for t in tallies}
    series = []
    for rnd in sorted(set(status) | set(tally) | {a["round"] for a in attacks}):
        row = tally.get(rnd, {})
        best = _best([a for a in attacks if a["round"] == rnd])
        scores = flat_scores(best, row)
        series.append({
            "round": rnd, "update_status": status.get(rnd), "epsilon": row.get("epsilon"),
            "log_capacity_round": row.get("log_capacity_round"),
            "log_capacity_cumulative": row.get("log_capacity_cumulative"),
            "mbp_bound": row.get("mbp_bound"), "abp_bound": row.get("abp_bound"),
            "mbp_estimate": row.get("mbp_estimate"), "abp_estimate": row.get("abp_estimate"),
            "ssim": None if best is None else best["ssim"],
            "prior_ssim": _prior_ssim(best),
            **{k: scores[k] for k in ("gain_ssim", "no_update_prior_ssim", "no_update_gain_ssim",
                                      "support_ssim", "identification_log_lower")},
            "empirical_leakage": game([a for a in attacks if a["round"] == rnd])[
                "empirical_leakage"],
            **_trust(row),
        })  # fmt: skip
    return series


def _prior_ssim(attack: Row | None) -> float | None:
    """The SSIM of the attack's label prior (the reference; None where none was scored)."""
    prior = None if attack is None else optional_loads(attack["prior_json"])
    return None if prior is None else prior["ssim"]


def _trust(row: Row) -> Row:
    """The verification, lower-bound, robustness and budget columns of a tally row."""
    return {
        "guarantee": row.get("guarantee"),
        "verification": optional_loads(row.get("verification_json")),
        "epsilon_declared": row.get("epsilon_declared"),
        "log_capacity_declared": row.get("log_capacity_declared"),
        "epsilon_lower": optional_loads(row.get("epsilon_lower_json")),
        "epsilon_observed": observed_summary(optional_loads(row.get("epsilon_observed_json"))),
        "pac_accuracy": row.get("pac_accuracy"),
        "pac_robust_confidence": _vacuous(row.get("pac_robust_confidence")),
        "pac_estimate": (optional_loads(row.get("details_json")) or {}).get("pac_estimate"),
    }


def _vacuous(confidence: float | None) -> float | str | None:
    """Theorem 4.3's confidence as stored, ``"vacuous"`` where it is 0 (``(1 + 4ξ)β ≥ 1``)."""
    return "vacuous" if confidence == 0.0 else confidence


def _budget(tallies: list[Row], updates: list[Row]) -> Row | None:
    """The client's ε budget and the first round it declined to train for want of it."""
    budgets = [t.get("epsilon_budget") for t in tallies if t.get("epsilon_budget") is not None]
    declined = [u["round"] for u in updates if u["status"] == "declined"]
    if not budgets and not declined:
        return None
    return {"epsilon_budget": budgets[-1] if budgets else None,
            "exhausted_round": min(declined) if declined else None}


def _client(
    client_id: int, updates: list[Row], tallies: list[Row], attacks: list[Row],
    failures: list[Row], game: Callable[[list[Row]], Row],
) -> Row:
    """One client's entry: mechanism, cumulative tallies after its last tallied round,
    worst empirical estimates, its identification game (``game``, flagged over the run),
    best attack, failures and the per-round series."""
    ok = [u for u in updates if u["status"] == "ok"]
    aggregated = [u for u in updates if u["status"] in ("ok", "undeclared")]
    latest = (ok or updates or [{}])[-1]
    formal = all(u["formal_guarantee"] == 1 for u in ok) if ok else None
    last = tallies[-1] if tallies else {}
    guarantee = last.get("guarantee") or (
        None if formal is None else "declared" if formal else "none")
    return {
        "client_id": client_id,
        "mechanism": latest.get("mechanism"),
        "mechanism_params": optional_loads(latest.get("mechanism_params_json")),
        "formal_guarantee": formal,
        "guarantee": guarantee,
        "pseudo_gradient": any(u["pseudo_gradient"] == 1 for u in ok) if ok else None,
        "rounds_participated": len(aggregated),
        "undeclared_rounds": [u["round"] for u in updates if u["status"] == "undeclared"],
        **{key: last.get(key) for key in _CUMULATIVE},
        "log_bayes_capacity": last.get("log_capacity_cumulative"),
        "threat_model": last.get("threat_model"),
        "mbp_bound": last.get("mbp_bound"),
        "abp_bound": last.get("abp_bound"),
        "mbp_estimate": _worst("mbp_estimate", [*tallies, *attacks]),
        "abp_estimate": _worst("abp_estimate", [*tallies, *attacks]),
        **game(attacks),
        "attack": _attack_summary(_best(attacks), tallies),
        **{k: v for k, v in _trust(last).items() if k not in ("guarantee", "verification")},
        "verification": verification_summary(tallies),
        **(properties_summary(tallies) or {"properties": None, "declared_reasons": []}),
        "budget": _budget(tallies, updates),
        "failures": failures,
        "per_round": _per_round(updates, tallies, attacks, game),
    }


_CENTRAL = ("epsilon_central", "central_sampling", "central_neighbouring", "client_rate")


def _central_to_the_last_round(clients: list[Row], tallies: dict[int, list[Row]]) -> None:
    """A client-level client's ``epsilon_central`` covers every round the server sampled in,
    taken part or not (privacy-math.md §11, §14), but its last tally row is as of the last round
    it took part in. Clients with the same mechanism share the value, so each takes that of the
    group's latest tally with a finite one (an inconsistent client keeps its ∞), and
    ``central_round`` says which round it is as of."""
    latest: dict[str, Row] = {}
    for client in clients:
        rows = tallies.get(client["client_id"]) or []
        if client.get("unit") != "client" or not rows:
            continue
        key = json.dumps([client["mechanism"], client["mechanism_params"]], sort_keys=True)
        last = rows[-1]
        value = last.get("epsilon_central")
        if value is not None and math.isfinite(value) and (
                key not in latest or last["round"] > latest[key]["round"]):
            latest[key] = last
    for client in clients:
        if client.get("unit") != "client" or client.get("epsilon_central") is None:
            continue
        key = json.dumps([client["mechanism"], client["mechanism_params"]], sort_keys=True)
        if key in latest and math.isfinite(client["epsilon_central"]):
            client.update({k: latest[key].get(k) for k in _CENTRAL},
                          central_round=latest[key]["round"])


def _oracle(config: Row) -> Row:
    """Whether the simulation-only ground-truth oracle was on, and what that means."""
    audit = config.get("audit", {})
    on = bool(audit.get("ground_truth", False)) and bool(audit.get("enabled", True))
    note = ("ON: every reply carried the record ids of its batches, so the auditor knew batch "
            "membership. The reported epsilon assumes the batch is secret (amplification by "
            "Poisson sampling); against this auditor it is not. Simulation only." if on else
            "off: no record id or batch size left any client.")
    return {"ground_truth": on, "note": note}


def build_report(store: AuditStore, problems: list[Problem] | None = None) -> Row:
    """The report object of a store (completed rounds only); ``problems`` from :func:`verify`
    become its ``integrity`` entry."""
    run = store.run_info()
    rounds = store.query("SELECT * FROM rounds WHERE status = 'completed' ORDER BY round")
    metrics = round_metrics(rounds)
    updates, tallies, attacks = (
        _by_client(_completed(store, t)) for t in ("updates", "tallies", "attacks")
    )
    failures = [{k: f[k] for k in f if k != "created"} for f in _completed(store, "failures")]
    failed_by_client = _by_client(failures)
    clients = sorted(set(updates) | set(tallies) | set(attacks) | set(failed_by_client))
    games, flagged = game_family(attacks, run["config"])
    report = {
        "run_dir": str(store.run_dir), "run_id": run["run_id"], "status": run["status"],
        "error": run["error"], "fedpriv_version": run["fedpriv_version"], "seed": run["seed"],
        "rounds": len(rounds), "completed_rounds": [r["round"] for r in rounds],
        "incomplete_rounds": store.incomplete_rounds(),
        "accuracy": [r["accuracy"] for r in rounds], "loss": [r["loss"] for r in rounds],
        "unverified_share": [m.get("unverified_share") for _, m in metrics],
        "attacks_skipped": [m.get("attacks_skipped", []) for _, m in metrics],
        "clients": [
            _client(c, updates[c], tallies[c], attacks[c], failed_by_client[c],
                    partial(client_game, c, flagged=flagged)) for c in clients
        ],
        "failures": failures, "wall_seconds": run["wall_seconds"], "config": run["config"],
        "oracle": _oracle(run["config"]),
        "verification": run_verification_summary(tallies, run["config"]),
        "identity": identity_summary(tallies), "identification_game": games,
        "storage": storage_summary(store, run["config"]), "chain": head_summary(store),
    }  # fmt: skip
    _central_to_the_last_round(report["clients"], tallies)
    report["central"] = central_block(metrics, run["config"])  # Flower's DP wrappers
    annotate_clients(report["clients"], metrics, report["central"])
    report["epsilon_bounds"] = epsilon_bounds(report["clients"], tallies)
    for client in report["clients"]:
        client["vacuous"] = vacuous_bounds(client, run["config"])
    if problems is not None:
        report["integrity"] = {
            "ok": not any(p.severity == "error" for p in problems),
            "problems": [p.to_dict() for p in problems],
        }
    return report


#: Columns ``tallies.csv`` adds to the ``tallies`` table's: ``epsilon_observed`` as a number
#: (its document's ``value``), then the client-round's best attack (highest SSIM) set against
#: the label prior (``prior_*``, ``gain_*``) and the no-update prior (``no_update_*``), its
#: support SSIM and its within-class identification score beside the round's log C
#: (``identification_*``; docs/leakage.md).
ATTACK_CSV_COLUMNS = ("attack", "attack_ssim", "attack_psnr", "attack_support_ssim",
                      *(k for k in FLAT_SCORE_KEYS if k != "support_ssim"))


def _attack_csv(attack: Row | None, tally: Row | None = None) -> Row:
    if attack is None:
        return dict.fromkeys(ATTACK_CSV_COLUMNS)
    scores = flat_scores(attack, tally)
    support = scores.pop("support_ssim")
    return {"attack": attack["attack"], "attack_ssim": attack["ssim"],
            "attack_psnr": attack["psnr"], "attack_support_ssim": support, **scores}


def _write_tallies_csv(store: AuditStore, path: Path) -> None:
    attacks: dict[tuple[int, int], list[Row]] = defaultdict(list)
    for attack in _completed(store, "attacks"):
        attacks[attack["round"], attack["client_id"]].append(attack)
    rows = [{**t,
             "epsilon_observed": (optional_loads(t["epsilon_observed_json"]) or {}).get("value"),
             **_attack_csv(_best(attacks.get((t["round"], t["client_id"]), [])), t)}
            for t in _completed(store, "tallies")]
    columns = [c["name"] for c in store.query("PRAGMA table_info(tallies)")]
    columns += ["epsilon_observed", *ATTACK_CSV_COLUMNS]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, buffer.getvalue().encode())


def _panel(store: AuditStore, attack: Row) -> Panel | None:
    """Originals vs reconstruction of one attack, paired as the scorer paired them
    (:mod:`fedpriv.audit.pairing`), or None where either is not stored."""
    pairing = load_pairing(store, attack)
    if pairing is None:
        return None
    ssim, prior = attack["ssim"], _prior_ssim(attack)
    caption = attack["attack"] + ("" if ssim is None else f", SSIM {ssim:.3f}")
    caption += "" if prior is None else f"\nlabel prior SSIM {prior:.3f}"
    caption += ("\n(no true batch stored)" if pairing.status == NO_TRUTH
                else "" if pairing.paired else "\n(columns not paired)")
    return Panel(f"client {attack['client_id']}", caption, pairing.originals,
                 pairing.reconstructions)


def _up_to_date(store: AuditStore, path: Path, rnd: int) -> bool:
    """Whether the figure of round ``rnd`` is newer than every image tensor it could show."""
    [row] = store.query(
        "SELECT max(created) AS newest FROM tensors "
        "WHERE round = ? AND kind IN ('ground_truth', 'reconstruction')",
        (rnd,),
    )
    return path.is_file() and row["newest"] is not None and path.stat().st_mtime > row["newest"]


def _write_figures(store: AuditStore, out_dir: Path) -> list[str]:
    """One grid per completed round with stored reconstructions; grids newer than their
    data are kept, so rebuilding the report after each round costs one new figure."""
    stored = [a for a in _completed(store, "attacks") if a["tensor_id"] is not None]
    written = []
    for rnd in sorted({a["round"] for a in stored}):
        path = out_dir / f"reconstructions_round{rnd}.png"
        if _up_to_date(store, path, rnd):
            written.append(str(path))
            continue
        per_client = _by_client(a for a in stored if a["round"] == rnd)
        best = sorted(
            (_best(rows) for rows in per_client.values()), key=lambda a: -(a["ssim"] or 0)
        )
        panels = [p for p in (_panel(store, a) for a in best[:MAX_PANELS]) if p is not None]
        panels = [p for p in panels if p.originals.shape[1:] == panels[0].originals.shape[1:]]
        if panels:
            title = f"Round {rnd}: true batch (top) vs reconstruction (bottom), best attack"
            write_grid(path, panels, title)
            written.append(str(path))
    return written


def _write_html(store: AuditStore, report: Row, out: Path) -> str:
    from fedpriv.audit.html_page import docs_prefix
    from fedpriv.audit.html_report import render_report_html

    views = attack_views(store, _completed(store, "attacks"))
    page = render_report_html(report, views, docs=docs_prefix(out))
    atomic_write_bytes(out / REPORT_HTML, page.encode())
    return str(out / REPORT_HTML)


def write_report(
    store: AuditStore,
    out_dir: Path | str | None = None,
    problems: list[Problem] | None = None,
    *,
    html: bool | None = None,
) -> Row:
    """Write ``report.json``, ``tallies.csv`` and the figures to ``out_dir`` (default: the
    run directory), each atomically; return the report, whose ``files`` lists them.

    ``html`` says whether to render ``report.html`` too; by default it is rendered once the
    run's status is no longer ``running``, so the rebuild after every round stays cheap and
    the final rebuild of a run writes the page.
    """
    out = Path(out_dir) if out_dir is not None else store.run_dir
    make_dirs_durable(out)
    report = build_report(store, problems)
    _write_tallies_csv(store, out / TALLIES_CSV)
    report["files"] = {
        "report": str(out / REPORT_JSON),
        "tallies_csv": str(out / TALLIES_CSV),
        "figures": _write_figures(store, out),
    }
    if report["status"] != "running" if html is None else html:
        report["files"]["html"] = _write_html(store, report, out)
    atomic_write_bytes(out / REPORT_JSON, (dumps(report) + "\n").encode())
    return report


def _check_report_dir(out: Path, store: AuditStore) -> bool:
    """``--out`` must be the run's own directory, a new one, an empty one, or one holding this
    run's report (fedpriv wrote it): a report holds clients' reconstructions, so it goes only
    where fedpriv decides who can read — directories it creates are private (``0700``,
    :data:`fedpriv.atomic.DIR_MODE`), and a directory that already holds other files is
    neither tightened (that would change what others wrote) nor written beside.

    Returns whether ``out`` is an existing empty directory, which the caller makes private as
    if fedpriv had created it.
    """
    check_out_dir("--out", out)
    if out.resolve() == store.run_dir.resolve() or not out.exists():
        return False
    existing = out / REPORT_JSON
    if existing.is_file():
        try:
            run_id = json.loads(existing.read_text(encoding="utf-8")).get("run_id")
        except (ValueError, UnicodeDecodeError, AttributeError):
            run_id = None
        if run_id == store.run_info()["run_id"]:
            return False
        raise InputError("--out", str(out), f"a directory without another run's {REPORT_JSON} "
                         "(fedpriv overwrites only its own report of this run)")
    if any(out.iterdir()):
        raise InputError("--out", str(out), "a new or empty directory, or one holding this "
                         f"run's {REPORT_JSON} (reports go only into private directories "
                         "fedpriv made, mode 0700; it does not write beside others' files)")
    return True


def report_run(
    run_dir: Path | str, out_dir: Path | str | None = None, *, hashes: bool = True
) -> Row:
    """Validate and verify a run directory's store, then write its report (``fedpriv report``).

    Raises
    ------
    StoreError
        The store is missing, foreign, of another schema version, truncated or corrupt.
    """
    run_dir = Path(run_dir)
    if out_dir is None and (run_dir / DB_NAME).is_file() and not os.access(run_dir, os.W_OK):
        raise InputError("RUN_DIR", str(run_dir), "a directory this user can write, or --out "
                         "DIR for the report of a read-only store")  # read-only, or not ours
    with AuditStore.open(run_dir, readonly=True) as store:
        out = None if out_dir is None else Path(out_dir)
        claim = out is not None and _check_report_dir(out, store)
        problems = verify(run_dir, hashes=hashes)
        if claim and out is not None:  # an empty directory: private, as one fedpriv makes
            out.chmod(DIR_MODE)
        try:
            return write_report(store, out_dir, problems, html=True)
        except sqlite3.DatabaseError as exc:
            raise StoreError(store.run_dir / DB_NAME, f"corrupt database ({exc})") from None
