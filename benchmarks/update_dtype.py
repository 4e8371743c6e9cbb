"""What storing updates in float16 does to an offline attack: IGA on one update stored both ways.

``python -m benchmarks.update_dtype`` prints one JSON object. It runs ``configs/attack-demo.toml``
(4 clients, mechanism ``none``, batch 1, one local step) on the in-process Grid with every update
stored in float32, then, for each client's update, runs the run's own IGA (2,000 iterations,
TV 1e-4, the auditor's seed) on the update as stored and on the same update rounded to float16
(:func:`fedpriv.audit.storage.encode_update`), and scores both against the stored true image.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["measure"]

ROOT = Path(__file__).resolve().parent.parent
PRESET = ROOT / "configs" / "attack-demo.toml"
SCORES = ("mse", "psnr", "ssim", "label_accuracy")


def measure(iterations: int | None = None) -> dict[str, Any]:
    """Scores of IGA on each update in float32 and in float16, and the rounding it saw
    (``iterations``: IGA's budget instead of the preset's 2,000; a few make a smoke run)."""
    from workflows.config import load_config

    sets = ["audit.attacks=[]", "audit.store_updates='all'"]
    cfg = load_config(PRESET, sets + ([f"audit.iterations={iterations}"] if iterations else []))
    work = Path(tempfile.mkdtemp(prefix="fedpriv-update-dtype-"))
    try:
        return _scores(cfg, work / "run")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _scores(cfg: Any, run_dir: Path) -> dict[str, Any]:
    """Run ``cfg``'s federation into ``run_dir``, then IGA on every stored update both ways."""
    from attacks.runner import run_attacks
    from clients.client_app import app
    from fedpriv.audit import AuditStore
    from fedpriv.audit.storage import encode_update
    from strategies.attack_schedule import attack_job, attack_scores
    from strategies.attack_views import declared_view
    from strategies.server_run import dataset_of, run_federation
    from workflows.local_grid import LocalGrid

    run_federation(LocalGrid(app, cfg.data.num_clients), cfg, run_dir)
    dataset = dataset_of(cfg)
    model = (cfg.model.name, dataset.input_shape, dataset.num_classes)
    rows = []
    with AuditStore.open(run_dir, readonly=True) as store:
        for update in store.iter_updates():
            theta = list(store.load_global(update.round).values())
            wide = list(store.load_update(update.update_id).values())
            half = [a.astype(np.float32) for a in encode_update(wide, "float16")]
            truth = store.load_ground_truth(update.round, update.client_id)
            views = [declared_view(model, theta, d, update.report) for d in (wide, half)]
            jobs = [attack_job(cfg.audit, "iga", view, update.round, update.client_id)
                    for view in views]
            scored = [attack_scores(r, truth["images"], truth["labels"], None)[0]  # no prior
                      for r in run_attacks(jobs, progress=False)]
            nonzero = np.concatenate([w.ravel() for w in wide]) != 0
            rel = np.abs(np.concatenate([(h - w).ravel() for h, w in zip(half, wide, strict=True)])
                         )[nonzero] / np.abs(np.concatenate([w.ravel() for w in wide]))[nonzero]
            rows.append({
                "client_id": update.client_id,
                "float32": {k: scored[0][k] for k in SCORES},
                "float16": {k: scored[1][k] for k in SCORES},
                "max_relative_rounding": float(rel.max()),
                "median_relative_rounding": float(np.median(rel)),
            })
    diffs = [abs(r["float16"]["ssim"] - r["float32"]["ssim"]) for r in rows]
    return {"preset": str(PRESET.relative_to(ROOT)), "iterations": cfg.audit.iterations,
            "rows": rows, "max_abs_ssim_difference": max(diffs)}


if __name__ == "__main__":
    print(json.dumps(measure()))
