"""One federated run on any Flower Grid (simulation or deployment): the ServerApp's body."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord
from flwr.serverapp import Grid
from tqdm import tqdm

from fedpriv.config import Config
from fedpriv.data import load_dataset
from fedpriv.jsonio import write_json
from fedpriv.models import build_model
from strategies.auditing import AuditingFedAvg
from strategies.auditor import Auditor
from strategies.evaluation import make_evaluate_fn

__all__ = ["initial_model", "run_federation"]

log = logging.getLogger(__name__)


def initial_model(cfg: Config) -> torch.nn.Module:
    """The global model before round 1, initialised deterministically from ``cfg.seed``
    without touching the process's global RNG."""
    data = cfg.data
    dataset = load_dataset(data.name, data.root, data.download, cfg.seed, data.test_fraction)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return build_model(cfg.model.name, dataset.input_shape, dataset.num_classes)


def run_federation(grid: Grid, cfg: Config, run_dir: Path) -> dict[str, Any]:
    """Train ``cfg.rounds`` rounds of audited FedAvg on ``grid``; write and return the report."""
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    auditor = Auditor(cfg, run_dir)
    n = cfg.data.num_clients
    bar = tqdm(total=cfg.rounds, desc="rounds", unit="round", dynamic_ncols=True, leave=True)

    def on_eval(server_round: int, acc: float, loss: float) -> None:
        if server_round > 0:
            auditor.end_round(server_round, acc, loss)
            bar.update(1)
            bar.set_postfix(accuracy=f"{acc:.3f}", loss=f"{loss:.3f}")
        else:
            auditor.end_round(0, acc, loss)

    strategy = AuditingFedAvg(
        auditor,
        fraction_train=cfg.train.fraction_train,
        fraction_evaluate=0.0,
        min_train_nodes=max(1, round(cfg.train.fraction_train * n)),
        min_available_nodes=n,
    )
    try:
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(initial_model(cfg).state_dict()),
            num_rounds=cfg.rounds,
            train_config=ConfigRecord({"fedpriv-config": cfg.to_json()}),
            evaluate_config=ConfigRecord({"fedpriv-config": cfg.to_json()}),
            evaluate_fn=make_evaluate_fn(cfg, on_eval),
        )
    finally:
        bar.close()
    report = auditor.report(time.monotonic() - started)
    write_json(run_dir / "report.json", report)
    return report
