"""Local training on one client: per-example gradients, clipping and a noise mechanism."""

from fedpriv.training.dpsgd import LocalResult, local_train, per_example_gradients, sample_batch

__all__ = ["LocalResult", "local_train", "per_example_gradients", "sample_batch"]
