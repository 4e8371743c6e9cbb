"""One federated run on any Flower Grid (simulation or deployment): the ServerApp's body."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord
from flwr.serverapp import Grid
from tqdm import tqdm

from fedpriv.audit import AuditStore, write_report
from fedpriv.config import Config
from fedpriv.data import Dataset, load_dataset
from fedpriv.models import build_model
from strategies.auditing import AuditingFedAvg
from strategies.auditor import Auditor
from strategies.evaluation import make_evaluate_fn

__all__ = ["initial_model", "run_federation"]

log = logging.getLogger(__name__)


def dataset_of(cfg: Config) -> Dataset:
    """The run's data set (cached per process)."""
    d = cfg.data
    return load_dataset(d.name, d.root, d.download, cfg.seed, d.test_fraction)


def initial_model(cfg: Config) -> torch.nn.Module:
    """The global model before round 1, initialised deterministically from ``cfg.seed``
    without touching the process's global RNG."""
    dataset = dataset_of(cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return build_model(cfg.model.name, dataset.input_shape, dataset.num_classes)


def _strategy(cfg: Config, auditor: Auditor) -> AuditingFedAvg:
    n = cfg.data.num_clients
    return AuditingFedAvg(
        auditor,
        fraction_train=cfg.train.fraction_train,
        fraction_evaluate=0.0,
        min_train_nodes=max(1, round(cfg.train.fraction_train * n)),
        min_available_nodes=n,
    )


def run_federation(grid: Grid, cfg: Config, run_dir: Path) -> dict[str, Any]:
    """Train ``cfg.rounds`` rounds of audited FedAvg on ``grid``.

    Every round lands in the audit store of ``run_dir`` as it completes, and ``report.json``
    is rebuilt after each round, so an interrupted run keeps everything it finished.
    """
    store = AuditStore.create(run_dir, cfg.to_dict(), cfg.seed)
    auditor = Auditor(cfg, store, dataset_of(cfg))
    bar = tqdm(total=cfg.rounds, desc="rounds", unit="round", dynamic_ncols=True)

    def on_eval(server_round: int, acc: float, loss: float) -> None:
        if server_round == 0:
            return
        auditor.end_round(server_round, acc, loss)
        write_report(store)
        bar.update(1)
        bar.set_postfix(accuracy=f"{acc:.3f}", loss=f"{loss:.3f}")

    status = "failed"
    try:
        _strategy(cfg, auditor).start(
            grid=grid,
            initial_arrays=ArrayRecord(initial_model(cfg).state_dict()),
            num_rounds=cfg.rounds,
            train_config=ConfigRecord({"fedpriv-config": cfg.to_json()}),
            evaluate_config=ConfigRecord({"fedpriv-config": cfg.to_json()}),
            evaluate_fn=make_evaluate_fn(cfg, on_eval),
        )
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        bar.close()
        store.mark_status(status)
        report = write_report(store)
        store.close()
    return report
