"""Adversaries that release otherwise at each local step (docs/trust.md §3), through a stand-in
for the Gaussian or Laplace mechanism (:mod:`clients.release_hook`) that clips (or not), scales
the clipped sum and draws the noise its own way:

* ``rademacher-noise`` / ``uniform-noise`` — noise of the declared variance per coordinate but
  a bounded law (±s, or uniform on ±√3·s): no differential privacy at all;
* ``signal-scale`` — the clipped sum × ``factor`` (10) before the declared noise;
* ``no-clip`` — the unclipped sum plus the declared noise;
* ``reuse-noise`` — the same noise vector at a given step of every round (the server, holding
  two releases, cancels it);
* ``cancel-noise`` — noise ``z`` in odd rounds and ``−z`` in the next one.

Every law draws from the training generator or from generators derived from
:attr:`~clients.adversaries.base.Turn.noise_seed`: the run's seed where the honest client's
noise comes from it (fedpriv's simulations, reproducible), else the node's secret.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from clients.adversaries.base import Turn, behaviour
from fedpriv.mechanisms import Mechanism
from fedpriv.mechanisms.base import check_batch_size
from fedpriv.seeding import derive_seed

Noise = Callable[[torch.Tensor, torch.Generator, int], torch.Tensor]
_NO_CLIP = 1e30


def per_coordinate_std(mechanism: Any) -> float:
    """The standard deviation of one coordinate of the mechanism's noise on the sum: ``σC``
    (Gaussian), ``√2·b`` (Laplace of scale ``b``)."""
    if hasattr(mechanism, "noise_std"):
        return float(mechanism.noise_std)
    return math.sqrt(2.0) * float(mechanism.noise_scale)


class StandIn:
    """Trains like ``inner`` (every attribute is its), but releases
    ``(signal·Σ ḡ_i + noise(Σ, generator, step)) / L`` — clipped to ``inner``'s bounds, or not.
    """

    def __init__(self, inner: Mechanism, noise: Noise, *, signal: float = 1.0,
                 clip: bool = True) -> None:
        self.inner, self.noise, self.signal, self.clip = inner, noise, signal, clip
        self.step = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def privatize(self, source: Any, generator: torch.Generator, *,
                  batch_size: float) -> torch.Tensor:
        """One step's release (the :meth:`fedpriv.mechanisms.Mechanism.privatize` call)."""
        check_batch_size(batch_size)
        inner = self.inner
        inner.check_layers(source.layer_sizes)
        bounds = inner.clip_bounds if self.clip else tuple(_NO_CLIP for _ in inner.clip_bounds)
        total = source.clipped_sum(bounds, inner.norm_ord)
        noise = self.noise(total, generator, self.step)
        self.step += 1
        return (self.signal * total + noise) / batch_size


def honest_noise(inner: Any) -> Noise:
    """The mechanism's own noise, drawn from the training generator."""
    return lambda total, generator, step: inner.draw_noise(total, generator)


def _seeded(turn: Turn, round_key: int, step: int, stream: str, total: torch.Tensor) -> Any:
    seed = derive_seed(turn.noise_seed, turn.pid, round_key, f"{stream}-{step}")
    return torch.Generator(device=total.device).manual_seed(seed)


def _rademacher(turn: Turn, inner: Mechanism) -> StandIn:
    s = per_coordinate_std(inner)

    def noise(total: torch.Tensor, generator: torch.Generator, step: int) -> torch.Tensor:
        bits = torch.randint(0, 2, total.shape, generator=generator, device=total.device)
        return s * (2.0 * bits.to(total.dtype) - 1.0)

    return StandIn(inner, noise)


def _uniform(turn: Turn, inner: Mechanism) -> StandIn:
    half_width = math.sqrt(3.0) * per_coordinate_std(inner)

    def noise(total: torch.Tensor, generator: torch.Generator, step: int) -> torch.Tensor:
        u = torch.rand(total.shape, generator=generator, device=total.device, dtype=total.dtype)
        return half_width * (2.0 * u - 1.0)

    return StandIn(inner, noise)


def _signal_scale(turn: Turn, inner: Mechanism) -> StandIn:
    return StandIn(inner, honest_noise(inner), signal=float(turn.factor))


def _no_clip(turn: Turn, inner: Mechanism) -> StandIn:
    return StandIn(inner, honest_noise(inner), clip=False)


def _reuse_noise(turn: Turn, inner: Mechanism) -> StandIn:
    own = honest_noise(inner)

    def noise(total: torch.Tensor, generator: torch.Generator, step: int) -> torch.Tensor:
        return own(total, _seeded(turn, 0, step, "adversary-reused-noise", total), step)

    return StandIn(inner, noise)


def _cancel_noise(turn: Turn, inner: Mechanism) -> StandIn:
    own, pair, sign = honest_noise(inner), (turn.round + 1) // 2, 1.0 if turn.round % 2 else -1.0

    def noise(total: torch.Tensor, generator: torch.Generator, step: int) -> torch.Tensor:
        return sign * own(total, _seeded(turn, pair, step, "adversary-cancelled-noise", total),
                          step)

    return StandIn(inner, noise)


behaviour("rademacher-noise", release=_rademacher)
behaviour("uniform-noise", release=_uniform)
behaviour("signal-scale", release=_signal_scale)
behaviour("no-clip", release=_no_clip)
behaviour("reuse-noise", release=_reuse_noise)
behaviour("cancel-noise", release=_cancel_noise)
