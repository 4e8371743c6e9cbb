"""The Flower strategy that aggregates, built from ``[strategy]``.

Any of Flower's server-side strategies (FedAvg, FedAvgM, FedProx, FedAdam, FedYogi, FedAdagrad,
FedMedian, FedTrimmedAvg, Krum, MultiKrum, Bulyan) is built here and handed to
:class:`~strategies.auditing.AuditingStrategy`, which wraps it as Flower's own DP wrappers wrap
theirs. The inner strategy trains whoever is connected (``min_available_nodes = 1``); the
wrapper waits once, before round 1, for every configured node.
"""

from __future__ import annotations

from flwr.serverapp.strategy import (
    Bulyan,
    FedAdagrad,
    FedAdam,
    FedAvg,
    FedAvgM,
    FedMedian,
    FedProx,
    FedTrimmedAvg,
    FedYogi,
    Krum,
    MultiKrum,
    Strategy,
)

from strategies.config import StrategyConfig

__all__ = ["STRATEGIES", "build_strategy"]

STRATEGIES: dict[str, type[Strategy]] = {
    "fedavg": FedAvg, "fedavgm": FedAvgM, "fedprox": FedProx, "fedadam": FedAdam,
    "fedyogi": FedYogi, "fedadagrad": FedAdagrad, "fedmedian": FedMedian,
    "fedtrimmedavg": FedTrimmedAvg, "krum": Krum, "multikrum": MultiKrum, "bulyan": Bulyan,
}  # fmt: skip


def build_strategy(strategy: StrategyConfig, fraction_train: float) -> Strategy:
    """The inner strategy ``[strategy]`` names: federated evaluation off (the server evaluates
    centrally), a ``fraction_train`` (``train.fraction_train``) of the connected nodes trained
    each round (every one at 1)."""
    return STRATEGIES[strategy.name](
        fraction_train=fraction_train,
        fraction_evaluate=0.0,
        min_train_nodes=1,
        min_available_nodes=1,
        **strategy.params(),
    )
