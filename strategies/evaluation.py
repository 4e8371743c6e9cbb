"""Centralised evaluation of the global model on the server's held-out split."""

from __future__ import annotations

from collections.abc import Callable

import torch
from flwr.app import ArrayRecord, MetricRecord

from fedpriv.config import Config
from fedpriv.data import load_dataset
from fedpriv.models import build_model

__all__ = ["make_evaluate_fn"]


def make_evaluate_fn(
    cfg: Config, on_result: Callable[[int, float, float], None]
) -> Callable[[int, ArrayRecord], MetricRecord]:
    """``evaluate_fn`` for ``Strategy.start``: accuracy and loss on the held-out test split.

    ``on_result(round, accuracy, loss)`` is called after every evaluation (round 0 is the
    initial model).
    """
    data = cfg.data
    dataset = load_dataset(data.name, data.root, data.download, cfg.seed, data.test_fraction)
    model = build_model(cfg.model.name, dataset.input_shape, dataset.num_classes)

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        model.load_state_dict(arrays.to_torch_state_dict())
        with torch.no_grad():
            logits = model(dataset.test_x)
            loss = float(torch.nn.functional.cross_entropy(logits, dataset.test_y))
            acc = float((logits.argmax(1) == dataset.test_y).float().mean())
        on_result(server_round, acc, loss)
        return MetricRecord({"accuracy": acc, "loss": loss})

    return evaluate
