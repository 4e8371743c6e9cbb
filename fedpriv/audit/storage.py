"""What the audit store keeps of each client update, and what the store costs in bytes.

Two ``[audit]`` keys bound the store's growth (``docs/audit-store.md``, "Storage policy"):

* ``store_updates`` — ``"all"`` keeps every accepted update's arrays (any update can be
  attacked again offline); ``"attacked"`` keeps those of the client-rounds the attack plan
  schedules (``strategies.attack_schedule.AttackPlan.scheduled``); ``"none"`` keeps none. The
  update's row and its tallies (ε, capacity, bounds, verification, canary scores) are kept
  whatever the policy; the true batch (record ids, images, labels) is kept with a kept update
  and for an attacked client-round (the report draws it beside the reconstruction).
* ``update_dtype`` — ``"float32"`` or ``"float16"`` for the kept updates (half the bytes;
  the broadcast θ and the aggregates stay float32, since a resumed run continues from them).
  float16 keeps 11 significant bits: relative rounding ≤ 2⁻¹¹ ≈ 4.9e-4 for entries of
  magnitude ≥ 6.1e-5, absolute ≤ 3e-8 below (subnormals). An update with an entry beyond
  float16's range (|x| > 65504) is kept in float32 rather than stored as ``inf``.

:func:`storage_summary` is the run-level ``storage`` object of ``report.json``: bytes by tensor
kind, in total and per client-round, over the completed rounds.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedpriv.audit.reader import DB_NAME, StoreReader

__all__ = ["encode_update", "keeps_update", "storage_summary"]

log = logging.getLogger(__name__)
_KINDS = ("global", "aggregate", "update", "ground_truth", "reconstruction")


def keeps_update(store_updates: str, attacked: bool) -> bool:
    """Whether the policy ``store_updates`` (validated by the config) keeps the arrays of an
    accepted update (``attacked``: the attack plan schedules its client-round)."""
    return store_updates == "all" or (store_updates == "attacked" and attacked)


def encode_update(arrays: Sequence[np.ndarray], dtype: str) -> list[np.ndarray]:
    """The arrays as stored: cast to ``dtype`` (``"float32"`` or ``"float16"``), or float32
    where float16 would overflow."""
    wide = [np.asarray(a, dtype=np.float32) for a in arrays]
    if dtype == "float32":
        return wide
    limit = float(np.finfo(np.float16).max)
    if any(a.size and float(np.abs(a).max()) > limit for a in wide):
        log.warning("an update exceeds float16's range (|x| > %g): kept in float32", limit)
        return wide
    return [a.astype(np.float16) for a in wide]


def storage_summary(store: StoreReader, config: Mapping[str, Any]) -> dict[str, Any]:
    """Bytes the store holds for its completed rounds, by tensor kind, and per client-round.

    ``client_rounds`` counts the replies of completed rounds (every ``updates`` row);
    ``updates_not_stored`` the accepted ones (``ok`` or ``undeclared``) whose arrays the policy
    did not keep;
    ``database_bytes`` is the SQLite file and its write-ahead log now (all rounds).
    """
    audit = config.get("audit", {})
    rows = store.query(
        "SELECT t.kind, COUNT(*) AS files, SUM(t.nbytes) AS bytes FROM tensors t "
        "JOIN rounds r ON r.round = t.round AND r.status = 'completed' GROUP BY t.kind"
    )
    by_kind = {kind: 0 for kind in _KINDS} | {r["kind"]: int(r["bytes"]) for r in rows}
    [counts] = store.query(
        "SELECT COUNT(*) AS replies, SUM(u.status IN ('ok', 'undeclared') AND u.tensor_id IS NULL) "
        "AS skipped "
        "FROM updates u JOIN rounds r ON r.round = u.round AND r.status = 'completed'"
    )
    replies = int(counts["replies"])
    database = sum(
        path.stat().st_size for path in (store.run_dir / DB_NAME, store.run_dir / f"{DB_NAME}-wal")
        if path.is_file()
    )
    total = sum(by_kind.values())
    per = (lambda b: round(b / replies, 1)) if replies else (lambda b: None)
    return {
        "store_updates": audit.get("store_updates", "all"),
        "update_dtype": audit.get("update_dtype", "float32"),
        "client_rounds": replies,
        "updates_not_stored": int(counts["skipped"] or 0),
        "tensor_files": sum(int(r["files"]) for r in rows),
        "bytes": {**by_kind, "total": total},
        "bytes_per_client_round": {**{k: per(v) for k, v in by_kind.items()}, "total": per(total)},
        "database_bytes": database,
    }
