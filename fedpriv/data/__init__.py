"""Data sets (offline digits; MNIST, Fashion-MNIST, CIFAR-10 through torchvision) and their
partition across clients. Names are imported on first use (:mod:`fedpriv.lazy`): the ``[data]``
section (:mod:`fedpriv.data.config`) does not import torch."""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
    from fedpriv.data.config import DataConfig
    from fedpriv.data.datasets import DATASETS, SHAPES, Dataset, load_dataset
    from fedpriv.data.partition import (
        client_sizes,
        dirichlet_partition,
        iid_partition,
        partition_indices,
    )

__all__ = [
    "DATASETS",
    "SHAPES",
    "DataConfig",
    "Dataset",
    "client_sizes",
    "dirichlet_partition",
    "iid_partition",
    "load_dataset",
    "partition_indices",
]

__getattr__ = lazy_exports(__name__, {
    "DATASETS": "datasets", "SHAPES": "datasets", "DataConfig": "config", "Dataset": "datasets",
    "client_sizes": "partition", "dirichlet_partition": "partition", "iid_partition": "partition",
    "load_dataset": "datasets", "partition_indices": "partition",
})
