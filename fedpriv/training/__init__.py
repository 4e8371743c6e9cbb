"""Local training on one client: batches, the mechanism's release, the optimiser's step."""

from fedpriv.training.dpsgd import (
    LocalResult,
    local_train,
    private_release,
    sample_batch,
    sampling_rate,
)
from fedpriv.training.optimizers import LocalOptimizer

__all__ = [
    "LocalOptimizer",
    "LocalResult",
    "local_train",
    "private_release",
    "sample_batch",
    "sampling_rate",
]
