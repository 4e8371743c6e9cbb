"""Local training on one client: per-example gradients, clipping and a noise mechanism."""

from fedpriv.training.dpsgd import (
    LocalResult,
    local_train,
    per_example_gradients,
    private_release,
    sample_batch,
    vmap_per_example_gradients,
)

__all__ = [
    "LocalResult",
    "local_train",
    "per_example_gradients",
    "private_release",
    "sample_batch",
    "vmap_per_example_gradients",
]
