"""What an attack returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["AttackResult", "Trial", "rank_key"]


@dataclass(frozen=True, eq=False)
class AttackResult:
    """Outcome of one gradient-inversion attack on one :class:`~attacks.view.ServerView`.

    Attributes
    ----------
    attack
        Registry name of the attack.
    reconstructions
        float32 array ``(n, C, H, W)`` in the data range, in no particular order.
    labels
        Recovered label of each reconstruction, int64 ``(n,)``.
    start
        The starting images of the kept restart, same shape as ``reconstructions``.
    loss
        Final gradient-matching loss of the kept restart.
    iterations
        Optimiser iterations per restart.
    restarts
        Number of restarts run.
    seed
        Seed of the attack's random generator.
    seconds
        Wall-clock time of the whole attack.
    pseudo_gradient
        True when the matched target was a multi-step pseudo-gradient (privacy-math.md §1).
    settings
        What ran: ``{"options": ...}`` for one attack; for ``strongest`` the ``chosen`` member
        and every member's attack, options and float64 ``residual``.
    """

    attack: str
    reconstructions: np.ndarray
    labels: np.ndarray
    start: np.ndarray
    loss: float
    iterations: int
    restarts: int
    seed: int
    seconds: float
    pseudo_gradient: bool
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The scalar fields, for JSON reports and the audit store."""
        return {
            "attack": self.attack,
            "num_images": int(self.reconstructions.shape[0]),
            "loss": float(self.loss),
            "iterations": self.iterations,
            "restarts": self.restarts,
            "seed": self.seed,
            "seconds": float(self.seconds),
            "pseudo_gradient": self.pseudo_gradient,
            "settings": self.settings,
        }


@dataclass(frozen=True, eq=False)
class Trial:
    """One restart's outcome (numpy, data range), before timing and labelling."""

    reconstructions: np.ndarray
    labels: np.ndarray
    start: np.ndarray
    loss: float


def rank_key(loss: float) -> float:
    """``loss`` to rank restarts and attacks by, least first: a NaN (a diverged attack: DLG's
    L-BFGS can) ranks as +inf, last, where a plain ``<`` would never compare it."""
    return loss if math.isfinite(loss) else math.inf
