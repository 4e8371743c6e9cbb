"""Attack settings tuned by the server on its own public data (issue 39, item 1).

Before attacking an update, the server builds a *shadow client*: ``round(L)`` records drawn
from its public data (the held-out evaluation split, :class:`attacks.estimators.prior.
PublicPrior`, never a client's training records), trained exactly as the attacked client
declared — the round's θ, learning rate, local steps, optimiser and mechanism
(:func:`attacks.simulate.simulate_view`). It runs the attack on the shadow's view at every
value of a log grid of IGA's total-variation weight, scores each reconstruction against the
shadow's own (public) records, and keeps the best by mean SSIM, each shadow attack at no
more than :data:`SHADOW_ITERATIONS` iterations (the tuning's cost). The attacked client's records
are never read: :func:`tune` receives the attacked client's :class:`ServerView` (public protocol
state) and the public data only. The choice and every grid score are recorded with each attack
(``attacks.settings_json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attacks.estimators.prior import PublicPrior
from attacks.registry import STRONGEST, run_attack
from attacks.scoring import score_reconstruction
from attacks.simulate import simulate_view
from attacks.view import ServerView

__all__ = ["SHADOW_ITERATIONS", "TUNE_MODES", "TV_GRID", "Tuning", "shadow_view", "tunable", "tune"]

#: ``audit.tune``: tune on the public data, or keep the fixed settings.
TUNE_MODES = ("public", "off")
#: IGA's total-variation weights tried on the shadow (a log grid around the default 1e-4).
TV_GRID = (1e-5, 1e-4, 1e-3, 1e-2)
#: The most iterations of a shadow attack: the tuning runs the grid at ``min(iterations, this)``.
#: Measured (``benchmarks/attack_speed.py``, ``tuning_across_rounds``; digits, paper MLP,
#: batch 32, the quickstart's and a noiseless declaration, fresh and trained θ): the weight
#: chosen at 500 scores within 0.02 shadow SSIM at 2,000 of the weight chosen at 2,000, in all
#: four settings, at 1.8-4x less CPU time.
SHADOW_ITERATIONS = 500
#: The attack the TV weight is tuned with, for each attack name that takes it.
_TUNED_WITH = {"iga": "iga", STRONGEST: "iga"}


def tunable(name: str) -> bool:
    """Whether the attack ``name`` has settings tuned on the shadow."""
    return name in _TUNED_WITH


@dataclass(frozen=True)
class Tuning:
    """The chosen options and how they were chosen (JSON-ready by :meth:`record`)."""

    options: dict[str, Any]
    grid: tuple[float, ...]
    shadow_ssim: tuple[float, ...]
    records: int
    iterations: int
    seed: int
    source: str

    def record(self) -> dict[str, Any]:
        """What is stored with each attack tuned so."""
        return {"mode": "public", "chosen": dict(self.options), "option": "tv_weight",
                "grid": list(self.grid), "shadow_ssim": list(self.shadow_ssim),
                "shadow_records": self.records, "iterations": self.iterations,
                "seed": self.seed, "public": self.source}


def shadow_view(view: ServerView, public: PublicPrior, seed: int
                ) -> tuple[ServerView, np.ndarray, np.ndarray]:
    """A shadow client's view with the attacked view's declared settings, on ``round(L)``
    public records drawn with ``seed``, and those records (images, labels)."""
    n = view.default_num_images
    rng = np.random.default_rng([seed, 39])
    ids = rng.choice(len(public.images), size=n, replace=n > len(public.images))
    images, labels = public.images[ids], public.labels[ids]
    shadow = simulate_view(
        view.model_name, torch.as_tensor(images, dtype=torch.float32),
        torch.as_tensor(labels, dtype=torch.int64), num_classes=view.num_classes,
        mechanism=view.mechanism, mechanism_params=view.mechanism_params,
        learning_rate=view.learning_rate, local_steps=view.local_steps, seed=seed,
        global_params=view.global_params, optimizer=view.optimizer,
    )
    return shadow, images, labels


def tune(name: str, view: ServerView, public: PublicPrior, *, iterations: int, seed: int,
         device: str = "cpu", grid: tuple[float, ...] = TV_GRID, early_stop: float = 0.0,
         shadow_iterations: int = SHADOW_ITERATIONS) -> Tuning:
    """The TV weight of the attack ``name`` that scores best on a shadow of ``view``.

    Parameters
    ----------
    name
        A :func:`tunable` attack.
    view
        The attacked client's view: only its public protocol state is used (θ, declared
        settings), to build the shadow.
    public
        The server's public data.
    iterations, seed, device, early_stop
        The attack's budget, seed, device and early stop, as the attack itself will run; the
        shadow attacks run ``min(iterations, shadow_iterations)`` iterations.
    grid
        The TV weights tried; ties go to the earlier.
    shadow_iterations
        The most iterations of a shadow attack (:data:`SHADOW_ITERATIONS`).
    """
    shadow, images, labels = shadow_view(view, public, seed)
    budget = min(iterations, shadow_iterations)
    scores = []
    for weight in grid:
        result = run_attack(_TUNED_WITH[name], shadow, iterations=budget, seed=seed,
                            device=device, tv_weight=weight, early_stop=early_stop)
        scored = score_reconstruction(result.reconstructions, images,
                                      recovered_labels=result.labels, true_labels=labels)
        scores.append(float(scored.summary()["ssim"]))
    best = int(np.argmax(scores))
    return Tuning({"tv_weight": grid[best]}, tuple(grid), tuple(scores), len(images),
                  budget, seed, public.source)
