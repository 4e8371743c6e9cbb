"""Flower's server-side optimisers behind the auditing wrapper: every round's replies conform.

Flower's FedAdam computes θ in float64 for a float32 model (FedYogi and FedAdagrad, today, do
not); the wrapper hands the next round the model's own dtypes (strategies/auditing.py
``_as_broadcast``), else every reply after round 1 would be refused as malformed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from clients.client_app import app
from strategies.server_run import run_federation
from workflows.config import load_config
from workflows.local_grid import LocalGrid

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["fedadam", "fedyogi", "fedadagrad"])
def test_every_round_of_a_server_optimiser_is_aggregated(tmp_path: Path, name: str) -> None:
    cfg = load_config(ROOT / "configs" / "quickstart.toml", [
        f"strategy.name='{name}'", "rounds=3", "data.num_clients=3", "train.local_steps=1",
        "audit.attacks=[]"])
    run_federation(LocalGrid(app, 3), cfg, tmp_path / "run")
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["failures"] == []
    assert [c["rounds_participated"] for c in report["clients"]] == [3, 3, 3]
    with sqlite3.connect(tmp_path / "run" / "audit.sqlite") as conn:
        updates = conn.execute("SELECT COUNT(*) FROM updates WHERE status = 'ok'").fetchone()
    assert updates == (9,)
