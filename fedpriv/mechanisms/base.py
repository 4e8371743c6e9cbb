"""The mechanism interface, and the clipping every noisy mechanism shares.

A :class:`Mechanism` carries its public parameters and everything that depends on them: the
release (:meth:`~Mechanism.privatize`, privacy-math.md §2), its Rényi-DP curve (§3), its pure
LDP parameter (§6), its Bayes capacity (§5) and its trade-off function (§4). The base class
implements the last four for a mechanism with **no formal guarantee** (infinite RDP, LDP and
capacity; the blatantly non-private trade-off ``f ≡ 0``): ``none`` and ``clip`` inherit them,
and a private mechanism overrides every one.

Build mechanisms with :func:`fedpriv.mechanisms.build_mechanism`, which validates the config;
the dataclass constructors do not.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedpriv.errors import InputError
from fedpriv.mechanisms import clipping
from fedpriv.mechanisms.parameters import read_positive, read_positive_list

if TYPE_CHECKING:
    import torch

__all__ = ["ClippedMechanism", "Mechanism", "ParamValue", "check_batch_size"]

ParamValue = float | int | str | bool


class Mechanism(ABC):
    """One noisy release of a client's aggregated, clipped per-example gradients."""

    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def from_params(cls, params: Mapping[str, Any], key_prefix: str) -> Mechanism:
        """Validate ``params`` (raising InputError on ``f"{key_prefix}.<param>"``) and build."""

    @abstractmethod
    def params(self) -> dict[str, ParamValue]:
        """Public parameters, flat; ``build_mechanism(m.name, m.params())`` rebuilds ``m``."""

    @property
    @abstractmethod
    def sensitivity(self) -> float:
        """Bound on one example's contribution to the sum (ℓ1 for Laplace, else ℓ2)."""

    @abstractmethod
    def privatize(
        self,
        per_example_grads: torch.Tensor,
        generator: torch.Generator,
        *,
        batch_size: float,
        layer_sizes: Sequence[int] | None = None,
    ) -> torch.Tensor:
        """Release the update for per-example gradients ``(B, p)`` as a ``(p,)`` tensor.

        ``batch_size`` is the public expected batch size ``L`` the sum is divided by; the
        actual ``B`` may differ (Poisson sampling) and may be 0. ``generator`` is the only
        source of randomness.
        """

    def check_layers(self, layer_sizes: Sequence[int] | None) -> None:
        """Raise InputError if the mechanism's parameters do not fit a model with these layers
        (checked before training starts); nothing to check without per-layer clipping."""
        return None

    @property
    def formal_guarantee(self) -> bool:
        """Whether the release satisfies a differential-privacy guarantee."""
        return False

    def rdp(self, orders: np.ndarray, dim: int) -> np.ndarray:
        """RDP ``τ_α`` of one unsubsampled release at each order (here: ``inf``)."""
        return np.full(np.shape(orders), math.inf)

    def pure_ldp_epsilon(self, radius: float) -> float:
        """Pure LDP parameter of one release for secrets within ``radius`` (the MBP bound ξ)."""
        return math.inf

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        """``log C_Bayes`` of one release for secrets within ``radius`` (here: ``inf``)."""
        return math.inf

    def tradeoff(self, alpha: np.ndarray, dim: int) -> np.ndarray:
        """Trade-off function ``f(α)`` of one release (here: blatant non-privacy, ``f ≡ 0``)."""
        return np.zeros(np.shape(alpha))


def check_batch_size(batch_size: float) -> None:
    """Reject a non-positive or non-finite expected batch size."""
    if not (math.isfinite(batch_size) and batch_size > 0):
        raise ValueError(f"privatize: batch_size must be finite and > 0, got {batch_size!r}")


@dataclass(frozen=True)
class ClippedMechanism(Mechanism, ABC):
    """A mechanism that clips each example (flat to ``clip``, or per layer) and sums.

    Subclasses set ``norm_ord`` (2, or 1 for Laplace) and implement :meth:`_release`.
    """

    clip: float = 1.0
    clip_per_layer: tuple[float, ...] | None = None
    key_prefix: str = field(default="mechanism", compare=False, repr=False)
    norm_ord: ClassVar[int] = 2

    @staticmethod
    def read_clipping(params: Mapping[str, Any], key_prefix: str) -> dict[str, Any]:
        """Validated ``clip``, ``clip_per_layer`` and ``key_prefix`` keyword arguments."""
        return {
            "clip": read_positive(params, "clip", 1.0, key_prefix),
            "clip_per_layer": read_positive_list(params, "clip_per_layer", key_prefix),
            "key_prefix": key_prefix,
        }

    def params(self) -> dict[str, ParamValue]:
        out: dict[str, ParamValue] = {"clip": self.clip}
        if self.clip_per_layer is not None:
            out["clip_per_layer"] = ",".join(repr(c) for c in self.clip_per_layer)
        return out

    @property
    def sensitivity(self) -> float:
        """``C`` (flat), or ``‖(C_1, …, C_R)‖`` in the clipping norm (per layer)."""
        if self.clip_per_layer is None:
            return self.clip
        return float(np.linalg.norm(self.clip_per_layer, ord=self.norm_ord))

    def check_layers(self, layer_sizes: Sequence[int] | None) -> None:
        """Raise InputError if per-layer bounds do not match the model's layers."""
        if self.clip_per_layer is None:
            return
        if layer_sizes is None or len(layer_sizes) != len(self.clip_per_layer):
            count = "no" if layer_sizes is None else len(layer_sizes)
            raise InputError(
                f"{self.key_prefix}.clip_per_layer",
                list(self.clip_per_layer),
                f"one bound per model layer ({count} layers)",
            )

    def clipped_sum(
        self, per_example_grads: torch.Tensor, layer_sizes: Sequence[int] | None
    ) -> torch.Tensor:
        """``Σ_i ḡ_i`` over the batch, shape ``(p,)``."""
        self.check_layers(layer_sizes)
        if self.clip_per_layer is None:
            return clipping.clipped_sum(per_example_grads, [self.clip], None, self.norm_ord)
        return clipping.clipped_sum(
            per_example_grads, self.clip_per_layer, layer_sizes, self.norm_ord
        )

    def privatize(
        self,
        per_example_grads: torch.Tensor,
        generator: torch.Generator,
        *,
        batch_size: float,
        layer_sizes: Sequence[int] | None = None,
    ) -> torch.Tensor:
        return self.release_sum(
            self.clipped_sum(per_example_grads, layer_sizes), generator, batch_size=batch_size
        )

    @property
    def clip_bounds(self) -> tuple[float, ...]:
        """``(C,)`` for flat clipping, else one ``C_r`` per layer."""
        return (self.clip,) if self.clip_per_layer is None else tuple(self.clip_per_layer)

    def release_sum(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, *, batch_size: float
    ) -> torch.Tensor:
        """The release given ``Σ_i ḡ_i`` formed elsewhere — e.g. by ghost clipping
        (:func:`fedpriv.training.linear_grads.ghost_clipped_sum`), which never materialises the
        per-example gradients. Same noise, same generator draws as :meth:`privatize`."""
        check_batch_size(batch_size)
        return self._release(clipped_sum, generator, batch_size)

    @abstractmethod
    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        """The released update given ``Σ ḡ_i``."""
