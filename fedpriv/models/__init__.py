"""Models: the paper MLP and a small CNN, built by name from the config. Names are imported on
first use (:mod:`fedpriv.lazy`): the ``[model]`` section (:mod:`fedpriv.models.config`) does
not import torch."""

from typing import TYPE_CHECKING

from fedpriv.lazy import lazy_exports

if TYPE_CHECKING:
    from fedpriv.models.config import ModelConfig
    from fedpriv.models.registry import (
        MODELS,
        build_model,
        count_parameters,
        register_model,
    )

__all__ = ["MODELS", "ModelConfig", "build_model", "count_parameters", "register_model"]

__getattr__ = lazy_exports(__name__, {
    "MODELS": "registry", "ModelConfig": "config", "build_model": "registry",
    "count_parameters": "registry", "register_model": "registry",
})
