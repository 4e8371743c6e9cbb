"""A small valid audit store (one completed round: θ and one client's update) made with the
quickstart config, and the edits a hostile file or database makes to it — re-chained
(:func:`rechain`), as someone with write access and fedpriv's code can, so that what is tested
is the defence behind the chain."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import numpy as np
from reliability_support import QUICKSTART

from fedpriv.audit import AuditStore
from fedpriv.audit.chain import CHAINED, GENESIS, entry_digest, next_head
from workflows.config import load_config


def make_store(run_dir: Path) -> Path:
    """A completed one-round run in ``run_dir``; returns the run directory."""
    cfg = load_config(QUICKSTART, [])
    with AuditStore.create(run_dir, cfg.to_dict(), seed=0) as store:
        store.begin_round(1)
        store.write_global(1, {"w": np.zeros(8, np.float32)})
        store.write_update(1, 0, {"w": np.ones(8, np.float32)}, {"mechanism": "gaussian"})
        store.complete_round(1, {"accuracy": 0.5})
        store.mark_status("completed")
    return run_dir


def rechain(run_dir: Path) -> None:
    """Make the chain agree with the rows as they now are: recompute the digest of every
    row's last entry from the row and every head after it."""
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    conn.row_factory = sqlite3.Row
    entries = conn.execute("SELECT * FROM chain ORDER BY seq").fetchall()
    last = {(e["tbl"], e["key_json"]): e["seq"] for e in entries}
    head = GENESIS
    with conn:
        for e in entries:
            digest, key = e["digest"], json.loads(e["key_json"])
            if last[(e["tbl"], e["key_json"])] == e["seq"]:
                where = " AND ".join(f"{c} = ?" for c in CHAINED[e["tbl"]])
                row = conn.execute(f"SELECT * FROM {e['tbl']} WHERE {where}", key).fetchone()
                digest = entry_digest(e["tbl"], key, None if row is None else dict(row))
            head = next_head(head, digest)
            conn.execute("UPDATE chain SET digest = ?, head = ? WHERE seq = ?",
                         (digest, head, e["seq"]))
    conn.close()


def update_row(run_dir: Path) -> dict:
    """The ``tensors`` row of the stored update."""
    with sqlite3.connect(run_dir / "audit.sqlite") as conn:
        conn.row_factory = sqlite3.Row
        return dict(conn.execute("SELECT * FROM tensors WHERE kind = 'update'").fetchone())


def set_update_row(run_dir: Path, **columns: object) -> None:
    """Alter the stored update's ``tensors`` row (what a hostile database holds)."""
    sets = ", ".join(f"{name} = ?" for name in columns)
    conn = sqlite3.connect(run_dir / "audit.sqlite")
    with conn:
        conn.execute(f"UPDATE tensors SET {sets} WHERE kind = 'update'", tuple(columns.values()))
    conn.close()
    rechain(run_dir)


def replace_update_file(run_dir: Path, data: bytes) -> Path:
    """Overwrite the update's file with ``data`` and make its row's hash and size agree (a
    hostile store is consistent where it can be); returns the file."""
    path = run_dir / update_row(run_dir)["path"]
    path.write_bytes(data)
    set_update_row(run_dir, sha256=hashlib.sha256(data).hexdigest(), nbytes=len(data))
    return path
