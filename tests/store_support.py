"""A small valid audit store (one completed round: θ and one client's update) made with the
quickstart config, and the edits a hostile file or database makes to it."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np
from reliability_support import QUICKSTART

from fedpriv.audit import AuditStore
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


def replace_update_file(run_dir: Path, data: bytes) -> Path:
    """Overwrite the update's file with ``data`` and make its row's hash and size agree (a
    hostile store is consistent where it can be); returns the file."""
    path = run_dir / update_row(run_dir)["path"]
    path.write_bytes(data)
    set_update_row(run_dir, sha256=hashlib.sha256(data).hexdigest(), nbytes=len(data))
    return path
