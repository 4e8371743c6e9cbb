"""Local training on one client: batches, the mechanism's release, the optimiser's step; for
your own model, loss and data, :func:`private_train` (``fedpriv.training.private``). Names
are imported on first use (:mod:`fedpriv.lazy`): the ``[train]`` section
(:mod:`fedpriv.training.config`) does not import torch."""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
    from fedpriv.training.config import TrainConfig
    from fedpriv.training.dpsgd import (
        LocalResult,
        local_train,
        private_release,
        sample_batch,
        sampling_rate,
    )
    from fedpriv.training.optimizers import LocalOptimizer, local_optimizer
    from fedpriv.training.private import PrivateRound, private_train

__all__ = [
    "LocalOptimizer",
    "LocalResult",
    "PrivateRound",
    "TrainConfig",
    "local_optimizer",
    "local_train",
    "private_release",
    "private_train",
    "sample_batch",
    "sampling_rate",
]

__getattr__ = lazy_exports(__name__, {
    "LocalOptimizer": "optimizers", "LocalResult": "dpsgd", "TrainConfig": "config",
    "local_optimizer": "optimizers", "local_train": "dpsgd", "private_release": "dpsgd",
    "sample_batch": "dpsgd", "sampling_rate": "dpsgd", "PrivateRound": "private",
    "private_train": "private",
})
