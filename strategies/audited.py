"""Audit your own Flower app: your strategy and model, fedpriv's honest-but-curious auditor.

:func:`audit_strategy` wraps any Flower strategy (FedAvg, FedProx, Krum, ...) in the
:class:`~strategies.auditing.AuditingStrategy` that fedpriv's own runs use, and owns the run's
audit store: call ``start`` on the result exactly as on the inner strategy, from your own
ServerApp. Every reply is checked against the :class:`~fedpriv.protocol.ClientReport` it
declares (``fedpriv.training.private_train`` writes one), verified, tallied per client (ε at δ,
log Bayes capacity), and written with every broadcast, update and aggregate to ``run_dir``
(``audit.sqlite``, ``report.json``, ``report.html``), as in ``fedpriv simulate``.

What differs from fedpriv's own runs: the server holds no records of your clients, so there is
no ground truth — the simulation-only oracle (``audit.ground_truth``) is refused, and the attacks
named in ``audit.attacks`` run unscored: their reconstructions are kept in the store, with no
SSIM/PSNR/MSE to set against them. ``model_factory`` is the model they rebuild (registered in
the model zoo under ``model_name`` for this process). Round accuracy and loss are what your
``evaluate_fn`` returns under ``accuracy`` and ``loss`` (empty without one).

Around one of Flower's DP strategy wrappers (in any nesting Flower runs, the audited strategy
outermost) the report also has a run-level ``central`` block — the wrapper's ε against a viewer
of the aggregate, beside Flower's own accountant's — and says per client what the wrapper
protects against the server (:mod:`strategies.flower_dp`, docs/flower-dp.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from fedpriv.audit import AuditStore
from fedpriv.audit.config import AuditConfig
from fedpriv.config import Config, config_from_dict
from fedpriv.data import Dataset
from fedpriv.errors import InputError
from fedpriv.models import register_model
from strategies.auditing import AuditingStrategy
from strategies.config import CARRIED_SECTIONS
from strategies.flower_dp import FlowerDpObserver
from strategies.pipeline import AuditPipeline
from strategies.server_run import close_run

__all__ = ["AuditedStrategy", "audit_strategy"]

EvaluateFn = Callable[[int, ArrayRecord], MetricRecord | None]


def _config(audit: AuditConfig | Mapping[str, Any] | None, num_clients: int, seed: int,
            rounds: int) -> Config:
    """The run's validated configuration: the audit section, the clients, the seed."""
    raw_audit = dataclasses.asdict(audit) if isinstance(audit, AuditConfig) else dict(audit or {})
    if raw_audit.get("ground_truth"):
        raise InputError("audit.ground_truth", True, "false: the server of your own app holds "
                         "no records to score against")
    raw = {"seed": seed, "rounds": rounds, "data": {"num_clients": num_clients},
           "audit": raw_audit}
    return config_from_dict(raw, carried=CARRIED_SECTIONS)


def _no_records(input_shape: tuple[int, ...], num_classes: int) -> Dataset:
    """The auditor's data set in an app whose records the server never sees: empty."""
    empty = torch.empty((0, *input_shape))
    labels = torch.empty((0,), dtype=torch.long)
    return Dataset("app", empty, labels, empty, labels, num_classes)


class AuditedStrategy(AuditingStrategy):
    """An :class:`~strategies.auditing.AuditingStrategy` that owns its run: ``start`` creates
    the audit store in ``run_dir``, runs Flower's loop, and writes the report (also when the
    run fails). Build it with :func:`audit_strategy`."""

    def __init__(self, strategy: Strategy, cfg: Config, run_dir: Path, *, model_name: str,
                 input_shape: tuple[int, ...], num_classes: int, join_timeout: float) -> None:
        super().__init__(strategy, None, num_nodes=cfg.data.num_clients,  # type: ignore[arg-type]
                         join_timeout=join_timeout, budgets=cfg.mechanism.has_budgets)
        self.cfg, self.run_dir = cfg, run_dir
        self.model_name, self.input_shape, self.num_classes = model_name, input_shape, num_classes
        self.report: dict[str, Any] | None = None
        self.flower_dp = FlowerDpObserver(strategy, cfg.data.num_clients, cfg.audit.delta)

    def start(
        self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
        timeout: float = 3600, train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: EvaluateFn | None = None,
    ) -> Result:
        """Run ``num_rounds`` audited rounds (Flower's ``Strategy.start``); the report is in
        ``run_dir/report.json`` and in :attr:`report`."""
        stored = {**self.cfg.to_dict(), "rounds": num_rounds}
        stored = {k: stored[k] for k in ("seed", "rounds", "data", "audit")}
        store = AuditStore.create(self.run_dir, stored, self.cfg.seed)
        store.hold_writer_lock()
        self.auditor = AuditPipeline(
            self.cfg.audit, store, _no_records(self.input_shape, self.num_classes),
            model=self.model_name, num_clients=self.cfg.data.num_clients, seed=self.cfg.seed,
            device=self.cfg.device, train=self.cfg.train,
        )
        status, error = "failed", None
        try:
            result = super().start(grid, initial_arrays, num_rounds, timeout, train_config,
                                   evaluate_config, self._closing_rounds(store, evaluate_fn))
            status = "completed"
            return result
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.report = close_run(store, status, error)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """The auditor's round; refused unless ``start`` was called on this strategy (it owns
        the run: a strategy wrapped around it, e.g. one of Flower's DP wrappers, goes inside)."""
        if self.auditor is None:
            raise InputError("strategy", type(self).__name__, "the outermost strategy, started "
                             "itself: wrap Flower's DP wrapper in audit_strategy, not the other "
                             "way round (docs/flower-dp.md)")
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The auditor's aggregation; what Flower's DP mods declared and whether the round
        released an aggregate are kept for the round's metrics (``strategies/flower_dp.py``)."""
        replies = list(replies)
        self.flower_dp.replied(server_round, replies)
        arrays, metrics = super().aggregate_train(server_round, replies)
        self.flower_dp.aggregated(server_round, arrays is not None)
        return arrays, metrics

    def _flower_dp_metrics(self, store: AuditStore, server_round: int) -> dict[str, Any]:
        """The round's metrics of Flower's DP wrapper and mods (empty without them)."""
        sampled = self.auditor.ledger.client_samples.get(server_round, (0, 0))[0]
        wanted = self.cfg.audit.enabled and self.flower_dp.wrapper is not None  # read only there
        rows = store.query("SELECT status, mechanism, mechanism_params_json FROM updates "
                           "WHERE round = ?", (server_round,)) if wanted else None
        return self.flower_dp.round_metrics(server_round, node_clients=self.auditor.node_clients,
                                            sampled=sampled, updates=rows)

    def _closing_rounds(self, store: AuditStore, evaluate_fn: EvaluateFn | None) -> EvaluateFn:
        """Flower's ``evaluate_fn``: after round r store the aggregate, evaluate it with the
        caller's function, and close the round in the store."""

        def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
            metrics = evaluate_fn(server_round, arrays) if evaluate_fn else None
            if server_round > 0:
                store.write_aggregate(server_round, {k: a.numpy() for k, a in arrays.items()})
                values = dict(metrics or {})
                self.auditor.end_round(server_round, float(values.get("accuracy", math.nan)),
                                       float(values.get("loss", math.nan)),
                                       self._flower_dp_metrics(store, server_round))
            return metrics

        return evaluate


def audit_strategy(
    strategy: Strategy,
    *,
    run_dir: str | Path,
    num_clients: int,
    audit: AuditConfig | Mapping[str, Any] | None = None,
    model_factory: Callable[[], torch.nn.Module] | None = None,
    model_name: str = "app-model",
    input_shape: tuple[int, ...] = (1,),
    num_classes: int = 2,
    seed: int = 0,
    join_timeout: float = 600.0,
) -> AuditedStrategy:
    """Wrap your Flower ``strategy`` so that fedpriv audits every reply of its run.

    Parameters
    ----------
    strategy
        Any Flower strategy; it samples and aggregates as it would alone, over the replies the
        auditor accepts.
    run_dir
        Where the audit store and the report go (created; an existing store is refused).
    num_clients
        The clients (partition ids ``0 … num_clients − 1``) to wait for before round 1.
    audit
        The ``[audit]`` section (an :class:`~fedpriv.audit.config.AuditConfig` or its TOML
        table as a mapping, e.g. ``{"delta": 1e-5, "accountant": "rdp"}``); defaults otherwise.
    model_factory, model_name, input_shape, num_classes
        Your model, for the attacks that rebuild it (see the module docstring).
    seed
        The run's seed (update sketches, canary designs).
    join_timeout
        Seconds to wait for ``num_clients`` nodes before round 1.

    Returns
    -------
    AuditedStrategy
        Call ``start(grid=..., initial_arrays=..., num_rounds=...)`` on it as on ``strategy``.
    """
    cfg = _config(audit, num_clients, seed, rounds=1)
    if model_factory is not None:
        register_model(model_name, lambda _shape, _classes: model_factory())
    return AuditedStrategy(strategy, cfg, Path(run_dir), model_name=model_name,
                           input_shape=tuple(input_shape), num_classes=num_classes,
                           join_timeout=join_timeout)
