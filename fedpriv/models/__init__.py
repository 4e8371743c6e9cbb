"""Models: the paper MLP and a small CNN, built by name from the config."""

from fedpriv.models.registry import MODELS, build_model, count_parameters

__all__ = ["MODELS", "build_model", "count_parameters"]
