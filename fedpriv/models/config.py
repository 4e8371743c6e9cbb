"""``[model]``: which network the clients train (:mod:`fedpriv.models.registry`)."""

from __future__ import annotations

from dataclasses import dataclass

from fedpriv.schema import one_of, rule

__all__ = ["ModelConfig"]


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``."""

    name: str = rule(*one_of("paper-mlp", "paper-mlp-standardized", "small-cnn"),
                     default="paper-mlp", doc="The network every client trains.")
