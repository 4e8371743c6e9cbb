"""Data sets (offline digits; MNIST, Fashion-MNIST, CIFAR-10 through torchvision) and their
partition across clients."""

from fedpriv.data.datasets import DATASETS, SHAPES, Dataset, load_dataset
from fedpriv.data.partition import dirichlet_partition, iid_partition, partition_indices

__all__ = [
    "DATASETS",
    "SHAPES",
    "Dataset",
    "dirichlet_partition",
    "iid_partition",
    "load_dataset",
    "partition_indices",
]
