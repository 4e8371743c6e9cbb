"""Centralised evaluation of the global model on the server's held-out split."""

from __future__ import annotations

from collections.abc import Callable

import torch
from flwr.app import ArrayRecord, MetricRecord

from fedpriv.data import Dataset
from fedpriv.models import build_model

__all__ = ["make_evaluate_fn"]


def make_evaluate_fn(
    dataset: Dataset, model_name: str, on_result: Callable[[int, float, float], None]
) -> Callable[[int, ArrayRecord], MetricRecord]:
    """``evaluate_fn`` for ``Strategy.start``: accuracy and loss on ``dataset``'s held-out test
    split, of the model ``model_name`` (``model.name``).

    ``on_result(round, accuracy, loss)`` is called after every evaluation (round 0 is the
    initial model).
    """
    model = build_model(model_name, dataset.input_shape, dataset.num_classes)

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        model.load_state_dict(arrays.to_torch_state_dict())
        with torch.no_grad():
            logits = model(dataset.test_x)
            loss = float(torch.nn.functional.cross_entropy(logits, dataset.test_y))
            acc = float((logits.argmax(1) == dataset.test_y).float().mean())
        on_result(server_round, acc, loss)
        return MetricRecord({"accuracy": acc, "loss": loss})

    return evaluate
