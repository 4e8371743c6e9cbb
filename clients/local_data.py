"""A client's share of the training data, cached per process (Ray actors serve many rounds)."""

from __future__ import annotations

from functools import lru_cache

import torch

from fedpriv.data import load_dataset, partition_indices
from fedpriv.data.config import DataConfig

__all__ = ["client_data"]


@lru_cache(maxsize=256)
def _partition(data: DataConfig, seed: int, num_partitions: int) -> tuple[torch.Tensor, ...]:
    dataset = load_dataset(data.name, data.root, data.download, seed, data.test_fraction)
    parts = partition_indices(
        dataset.train_y.numpy(), num_partitions, data.partition, data.dirichlet_alpha, seed
    )
    return tuple(torch.as_tensor(p) for p in parts)


def client_data(
    data: DataConfig, seed: int, partition_id: int, num_partitions: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, y, record_ids)`` of partition ``partition_id``; record ids index the training set."""
    dataset = load_dataset(data.name, data.root, data.download, seed, data.test_fraction)
    ids = _partition(data, seed, num_partitions)[partition_id]
    return dataset.train_x.index_select(0, ids), dataset.train_y.index_select(0, ids), ids
