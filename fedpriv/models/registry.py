"""Build a model by its config name (`[model] name`)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from fedpriv.errors import InputError
from fedpriv.models.cnn import SmallCNN
from fedpriv.models.mlp import FMNIST16_MEAN, FMNIST16_STD, PaperMLP

__all__ = ["MODELS", "build_model", "count_parameters", "register_model"]


def _features(input_shape: tuple[int, ...]) -> int:
    features = 1
    for d in input_shape:
        features *= d
    return features


def _paper_mlp(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return PaperMLP(in_features=_features(input_shape), num_classes=num_classes)


def _paper_mlp_standardized(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return PaperMLP(in_features=_features(input_shape), num_classes=num_classes,
                    input_mean=FMNIST16_MEAN, input_std=FMNIST16_STD)


def _small_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    return SmallCNN(in_channels=input_shape[0], num_classes=num_classes)


MODELS: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "paper-mlp": _paper_mlp,
    "paper-mlp-standardized": _paper_mlp_standardized,
    "small-cnn": _small_cnn,
}
_BUILT_IN = frozenset(MODELS)


def register_model(name: str, factory: Callable[[tuple[int, ...], int], nn.Module]) -> None:
    """Add a model to the zoo under ``name``, for this process (a user's own model, which the
    server's attacks rebuild by name); ``factory(input_shape, num_classes)`` builds it. A name
    registered before is given the new factory.

    Raises
    ------
    InputError
        ``name`` is one of fedpriv's own models.
    """
    if name in _BUILT_IN:
        raise InputError("model name", name, f"a name other than {sorted(_BUILT_IN)}")
    MODELS[name] = factory


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int = 10) -> nn.Module:
    """Return a freshly initialised model.

    Parameters
    ----------
    name
        ``"paper-mlp"``, ``"paper-mlp-standardized"`` (the paper MLP on standardised inputs:
        :mod:`fedpriv.models.mlp`) or ``"small-cnn"``.
    input_shape
        ``(channels, height, width)`` of one example.
    num_classes
        Number of output classes.
    """
    try:
        factory = MODELS[name]
    except KeyError:
        raise InputError("model.name", name, f"one of {sorted(MODELS)}") from None
    return factory(tuple(input_shape), num_classes)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
