"""What an honest-but-curious server sees of one client update — and nothing more.

The attack entry point receives only a :class:`ServerView` (after breaching's
``cases/servers.py``, which separates the server's view from the attack). It carries public
protocol state: the model, the broadcast parameters, the client's update and the public
training and mechanism parameters. Ground truth (images, labels) never enters it; only the
scoring code sees that.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fedpriv.errors import InputError
from fedpriv.optimizer_settings import OptimizerSettings

if TYPE_CHECKING:
    from torch import nn

__all__ = ["ServerView"]


def _frozen_arrays(key: str, arrays: Sequence[Any]) -> tuple[np.ndarray, ...]:
    out = []
    for array in arrays:
        copy = np.array(array, dtype=np.float32, copy=True)
        if not np.all(np.isfinite(copy)):
            raise InputError(key, "non-finite entries", "finite parameter values")
        copy.setflags(write=False)
        out.append(copy)
    return tuple(out)


@dataclass(frozen=True, eq=False)
class ServerView:
    """The server's view of one client's update in one round (privacy-math.md §1).

    Parameters
    ----------
    model_name
        Model zoo name (``fedpriv.models.build_model``).
    input_shape
        ``(channels, height, width)`` of one example.
    num_classes
        Number of output classes.
    global_params
        The broadcast parameters θ, in ``model.parameters()`` order.
    update
        The client's update Δ = θ_client − θ, same order and shapes.
    learning_rate
        Client learning rate η (public).
    batch_size
        Expected batch size L (public; the actual size may differ under Poisson sampling).
    local_steps
        Number of local optimiser steps behind ``update``.
    mechanism
        Name of the client's noise mechanism.
    mechanism_params
        The mechanism's public parameters.
    data_range
        ``(low, high)`` range of input pixel values.
    optimizer
        The declared local optimiser (:class:`~fedpriv.optimizer_settings.OptimizerSettings`);
        None is plain SGD. The attacks replay it over ``local_steps``.
    """

    model_name: str
    input_shape: tuple[int, ...]
    num_classes: int
    global_params: tuple[np.ndarray, ...]
    update: tuple[np.ndarray, ...]
    learning_rate: float
    batch_size: float
    local_steps: int = 1
    mechanism: str = "none"
    mechanism_params: Mapping[str, Any] = field(default_factory=dict)
    data_range: tuple[float, float] = (0.0, 1.0)
    optimizer: OptimizerSettings | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "input_shape", tuple(int(d) for d in self.input_shape))
        set_(self, "global_params", _frozen_arrays("view.global_params", self.global_params))
        set_(self, "update", _frozen_arrays("view.update", self.update))
        set_(self, "mechanism_params", dict(self.mechanism_params))
        set_(self, "data_range", (float(self.data_range[0]), float(self.data_range[1])))
        self._validate()

    def _validate(self) -> None:
        shapes = [p.shape for p in self.global_params]
        if [u.shape for u in self.update] != shapes:
            raise InputError("view.update", "shapes differ", f"arrays of shapes {shapes}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise InputError("view.learning_rate", self.learning_rate, "a finite number > 0")
        if not (math.isfinite(self.batch_size) and self.batch_size > 0):
            raise InputError("view.batch_size", self.batch_size, "a finite number > 0")
        if int(self.local_steps) != self.local_steps or self.local_steps < 1:
            raise InputError("view.local_steps", self.local_steps, "an integer >= 1")
        if self.num_classes < 2:
            raise InputError("view.num_classes", self.num_classes, "an integer >= 2")
        low, high = self.data_range
        if not low < high:
            raise InputError("view.data_range", self.data_range, "(low, high) with low < high")

    @property
    def pseudo_gradient(self) -> bool:
        """True when ``gradient()`` is a pseudo-gradient (several local steps, §1)."""
        return self.local_steps > 1

    @property
    def default_num_images(self) -> int:
        """Number of images to reconstruct when the caller does not say: round(L), ≥ 1."""
        return max(1, round(self.batch_size))

    def gradient(self) -> list[np.ndarray]:
        """The released noisy gradient g̃ = −Δ/(η·steps) (privacy-math.md §1).

        For ``local_steps > 1`` this is only a pseudo-gradient (see :attr:`pseudo_gradient`).
        """
        scale = -1.0 / (self.learning_rate * self.local_steps)
        return [(scale * u).astype(np.float32) for u in self.update]

    def build_model(self) -> nn.Module:
        """The model with the broadcast parameters θ loaded, in evaluation mode."""
        import torch

        from fedpriv.models import build_model

        with torch.random.fork_rng(devices=[]):  # init draws are overwritten: spare global RNG
            model = build_model(self.model_name, self.input_shape, self.num_classes)
        params = list(model.parameters())
        if [tuple(p.shape) for p in params] != [p.shape for p in self.global_params]:
            raise InputError("view.global_params", "shapes differ", f"{self.model_name} shapes")
        with torch.no_grad():
            for param, value in zip(params, self.global_params, strict=True):
                param.copy_(torch.from_numpy(np.array(value)))
        return model.eval()
