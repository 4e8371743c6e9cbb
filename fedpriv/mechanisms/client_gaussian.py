"""``client-gaussian``: client-level (update-level) DP — clip the whole update, add Gaussian noise.

privacy-math.md §11 (DP-FedAvg, McMahan et al. 2018; Flower's ``fixedclipping_mod`` and
``LocalDpMod`` with the noise on the client): local training is plain — each local step applies
the raw mean gradient, as a ClientApp behind Flower's mods trains — and the client releases
``Δ̄ + N(0, σ²S² I)`` with ``Δ̄ = Δ · min(1, S/‖Δ‖₂)`` (FlatClip over every parameter) and
``Δ = θ_client − θ``. ``S`` is the ``clip`` parameter, ``σ`` the ``noise_multiplier``.

Which neighbours (§11):

* **against the server** — it sees each release and knows who took part; the secret is the
  client's data, replaced by any other: ``Δ̄`` moves by at most ``2S``, so one release is the
  Gaussian mechanism at ``μ = 2/σ`` (the Gaussian at noise multiplier ``σ/2``), composed over
  the rounds the client took part in, never amplified by the server's client sampling. This
  is :class:`ClientGaussianRelease`, what the ledger's ``epsilon`` tallies.
* **against a third party that sees only the aggregate** — add/remove of a client,
  sensitivity ``S``, amplified by the rate ``q`` at which the server samples clients,
  composed over all rounds: :meth:`ClientGaussianRelease.central`, the ledger's
  ``epsilon_central``.

Bayes capacity against the server: §5's Gaussian formula with ``s = σS`` and ``r = S`` (the
ball of clipped updates). The server checks the noise at full power: the update *is* the
release (one release per round, no local steps inside it), tested by
:func:`fedpriv.verification.verify_gaussian` with ``k = 1``, ``L = 1`` and a signal of norm at
most ``S`` (:meth:`fedpriv.protocol.ClientReport.declaration`).

The release is written here, on numpy arrays with an explicit generator, rather than with
Flower's ``compute_clip_model_update`` / ``add_gaussian_noise_inplace``: the library imports no
Flower, and Flower's noise draws from numpy's global, unseeded state. The clipping is the same
FlatClip.

Its release class is not offered by ``fedpriv account`` (it subclasses the Gaussian's: the
registry lists direct subclasses of ``Release`` only): its rate is over clients, which a run
knows and the command does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from fedpriv.accounting.events import NoGuarantee, Release
from fedpriv.errors import InputError
from fedpriv.mechanisms.base import check_batch_size
from fedpriv.mechanisms.gaussian import GaussianMechanism, GaussianRelease

if TYPE_CHECKING:
    import torch

    from fedpriv.canaries import CanaryDesign
    from fedpriv.gradients import GradientSource
    from fedpriv.verification import ClientUpdate
    from fedpriv.verification.observed import NoiseObservation

__all__ = ["ClientGaussianMechanism", "ClientGaussianRelease", "clip_update"]


@dataclass(frozen=True)
class ClientGaussianRelease(GaussianRelease):
    """One client-level release ``Δ̄ + N(0, σ²S²I)`` as the server meets it: replace-one
    neighbours, shift ``≤ 2S``, hence the Gaussian at ``σ/2`` for RDP, PLD and trade-off
    (dp-accounting's ``GaussianDpEvent(σ/2)``); Bayes capacity at ``s = σS`` for secrets
    within ``radius`` clip bounds ``S`` (§5, §11)."""

    mechanism: ClassVar[str] = "client-gaussian"

    @property
    def accounted_noise(self) -> float:
        """The Gaussian noise multiplier of the replace-one pair: ``σ/2`` (shift ``2S``)."""
        return self.noise_multiplier / 2.0

    def central(self) -> Release:
        """The release as a third party that sees only the aggregate meets it: add/remove of a
        client, sensitivity ``S`` — the Gaussian at ``σ`` (to be Poisson-sampled at the
        server's client rate ``q`` and composed over all rounds, §11)."""
        return GaussianRelease(self.noise_multiplier)


def clip_update(delta: Sequence[np.ndarray], clip: float) -> list[np.ndarray]:
    """``Δ · min(1, S/‖Δ‖₂)`` over the flattened arrays (FlatClip; McMahan et al. 2018), in
    float64."""
    arrays = [np.asarray(d, dtype=np.float64) for d in delta]
    norm = math.sqrt(sum(float(np.vdot(a, a)) for a in arrays))
    scale = 1.0 if norm <= clip else clip / norm
    return [a * scale for a in arrays]


@dataclass(frozen=True)
class ClientGaussianMechanism(GaussianMechanism):
    """Plain local steps; the update clipped to ``S = clip`` in ℓ2 with ``N(0, (σS)² I)``
    added (module docstring)."""

    name: ClassVar[str] = "client-gaussian"
    label: ClassVar[str] = "Gaussian (client level)"
    level: ClassVar[str] = "client"
    additive: ClassVar[bool] = False  # no record-level canaries inside an update-level release

    def check(self, key_prefix: str) -> None:
        if self.clip_per_layer is not None:
            raise InputError(f"{key_prefix}.clip_per_layer", list(self.clip_per_layer),
                             "unset: client-level clipping is over the whole update")

    def privatize(
        self, source: GradientSource, generator: torch.Generator, *, batch_size: float
    ) -> torch.Tensor:
        """One plain local step: the mean raw gradient (no per-record clipping or noise; the
        update is privatised once, by :meth:`privatize_update`)."""
        check_batch_size(batch_size)
        return source.gradient_sum() / batch_size

    def privatize_update(
        self, delta: Sequence[np.ndarray], generator: np.random.Generator
    ) -> list[np.ndarray]:
        """The released update ``Δ̄ + N(0, σ²S² I)`` (float64, shapes of ``delta``)."""
        clipped = clip_update(delta, self.clip)
        return [c + self.noise_std * generator.standard_normal(c.shape) for c in clipped]

    def observe(self, update: ClientUpdate) -> NoiseObservation | str:
        """Not measured yet for client-level releases (the recovered update is not the
        record-level noisy sum the bounds of :mod:`fedpriv.verification.observed` are about)."""
        return "not observable: not measured for client-level releases"

    def canary_scores(
        self, design: CanaryDesign, pseudo_gradient: np.ndarray, *, batch_size: float,
        steps: int,
    ) -> np.ndarray | None:
        """None: canaries are record-level signals; a client-level release has none."""
        return None

    def pac_accuracy(self, beta: float, dim: int, batch_size: float) -> float:
        """``σS·χ_p⁻¹(1 − β)``: the noise is on the update itself (no divisor)."""
        from fedpriv.leakage.robustness import gaussian_accuracy

        return gaussian_accuracy(beta, dim, self.noise_std, 1.0)

    def release(self, dim: int) -> Release:
        if self.noise_multiplier == 0.0 or not math.isfinite(self.noise_std):
            return NoGuarantee(self.name)
        return ClientGaussianRelease(self.noise_multiplier)
