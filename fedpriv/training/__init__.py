"""Local training on one client: batches, the mechanism's release, the SGD step."""

from fedpriv.training.dpsgd import (
    LocalResult,
    local_train,
    private_release,
    sample_batch,
    sampling_rate,
)

__all__ = ["LocalResult", "local_train", "private_release", "sample_batch", "sampling_rate"]
