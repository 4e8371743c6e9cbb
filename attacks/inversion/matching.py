"""One gradient matcher, composed of parts; DLG, iDLG and IGA are configurations of it.

Every optimisation attack here minimises D(∇θL(x', y'), g̃) + Σ R(x') over dummy images x'
and differs only in its parts:

* the **distance** D: squared L2 (DLG, iDLG) or 1 − cosine (IGA)
  (:mod:`attacks.inversion.objective`);
* the **labels** y': soft labels softmax(ℓ') optimised with the images (:class:`SoftLabels`,
  DLG) or labels recovered analytically once and held fixed (:class:`AnalyticLabels`, iDLG
  and IGA; :mod:`attacks.labels`);
* the **regularisers** R: none, or total variation (IGA);
* the **optimiser**: L-BFGS (DLG, iDLG) or Adam on the gradient's sign with step decay (IGA)
  (:mod:`attacks.inversion.optimisers`), the images projected onto the data range after
  every step when ``boxed`` (IGA);
* the **initialisation** of x': uniform random images (:func:`uniform_images`) or the
  analytic first-layer solution (:func:`analytic_images`).

When the view's mechanism clips each example (its declared bound is public), the release
weighs example ``i`` by its clip factor ``min(1, C/‖g_i‖)``; the dummy gradient then carries
free positive weights ``e^{ω_i}`` (ω = 0 at the start, :data:`WEIGHT_STEP`), optimised with
the images. Without them the matcher can only move the images to imitate the weights (IGA,
1000 iterations, paper MLP at a fresh initialisation, C = 1: SSIM 0.50 clipped against 0.61
unclipped at batch 8; with them 0.62; at batch 128 0.317 → 0.335, unclipped 0.405).

Each restart draws a fresh start from the attack's generator; the restart of least final
distance (without the regularisers, computed in float64: at the truth it is ~1e-11, below
float32 resolution) is kept. With ``local_steps = K > 1`` declared, the dummy gradient is the
pseudo-gradient of K replayed local steps (:class:`~attacks.inversion.objective.InversionProblem`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from attacks.inversion.objective import InversionProblem
from attacks.labels import recover_labels
from attacks.result import Trial, rank_key
from attacks.view import ServerView

if TYPE_CHECKING:
    from attacks.inversion.analytic import FirstLayer

__all__ = [
    "AnalyticLabels",
    "GradientMatcher",
    "KnownLabels",
    "SoftLabels",
    "analytic_images",
    "uniform_images",
]

#: The clip weights are ``e^{s·v}`` with ``v`` optimised like the images: their share ``s`` of
#: each step. Signed Adam moves every variable by the full learning rate, so ``s = 1`` lets
#: the weights swing by ±0.1 a step and, at batch 128, collapse the images again (SSIM 0.09);
#: 0.003 (ω moves at most ~0.12 in a run) measured best at batch 8 and 128 (module docstring).
WEIGHT_STEP = 0.003

Distance = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor]], torch.Tensor]
Regulariser = Callable[[torch.Tensor], torch.Tensor]
Initialisation = Callable[[InversionProblem, int, torch.Generator, "RestartLabels"],
                          torch.Tensor]


class TrialLabels(Protocol):
    """The labels of one restart: what they optimise, the cross-entropy targets, the result."""

    variables: tuple[torch.Tensor, ...]  # optimised together with the images

    def targets(self) -> torch.Tensor: ...

    def found(self) -> np.ndarray: ...


class RestartLabels(Protocol):
    """The labels known before the restarts; each restart starts its :class:`TrialLabels`."""

    def start(
        self, problem: InversionProblem, num_images: int, gen: torch.Generator
    ) -> TrialLabels: ...


class LabelStrategy(Protocol):
    """How an attack comes by its labels: once per attack, before any restart."""

    def prepare(self, view: ServerView, num_images: int, gen: torch.Generator) -> RestartLabels:
        ...


class Optimiser(Protocol):
    """Minimises ``objective`` over ``variables`` (images first) in ``iterations`` steps,
    calling ``project`` after every step."""

    def minimise(
        self,
        objective: Callable[[], torch.Tensor],
        variables: list[torch.Tensor],
        iterations: int,
        project: Callable[[], None],
        converged: Callable[[], bool] | None = None,
    ) -> None: ...


class _Soft:
    def __init__(self, logits: torch.Tensor) -> None:
        self.variables = (logits,)

    def targets(self) -> torch.Tensor:
        return torch.softmax(self.variables[0], dim=1)

    def found(self) -> np.ndarray:
        return self.variables[0].detach().argmax(dim=1).cpu().numpy().astype(np.int64)


class _Fixed:
    variables: tuple[torch.Tensor, ...] = ()

    def __init__(self, labels: torch.Tensor, device: torch.device) -> None:
        self._labels, self._on_device = labels, labels.to(device)

    def targets(self) -> torch.Tensor:
        return self._on_device

    def found(self) -> np.ndarray:
        return self._labels.numpy().astype(np.int64)


@dataclass(frozen=True)
class SoftLabels:
    """Dummy soft labels softmax(ℓ'), ℓ' ~ N(0, 1) per restart, optimised jointly with the
    images (Zhu et al. 2019, Algorithm 1); the reported label is argmax ℓ'."""

    def prepare(self, view: ServerView, num_images: int, gen: torch.Generator) -> SoftLabels:
        """Nothing is known before the restarts: the strategy itself."""
        return self

    def start(
        self, problem: InversionProblem, num_images: int, gen: torch.Generator
    ) -> TrialLabels:
        """Draw ℓ' on the CPU generator (after the images), then move it to the device."""
        logits = torch.randn((num_images, problem.num_classes), generator=gen)
        return _Soft(logits.to(problem.device).requires_grad_(True))


@dataclass(frozen=True)
class KnownLabels:
    """Class indices (CPU int64) held fixed in every restart: labels the attacker knows, or
    those :class:`AnalyticLabels` recovered."""

    labels: torch.Tensor

    def prepare(self, view: ServerView, num_images: int, gen: torch.Generator) -> KnownLabels:
        """Known before the restarts: the strategy itself."""
        return self

    def start(
        self, problem: InversionProblem, num_images: int, gen: torch.Generator
    ) -> TrialLabels:
        """The indices on the problem's device; nothing to optimise, nothing drawn."""
        return _Fixed(self.labels, problem.device)


@dataclass(frozen=True)
class AnalyticLabels:
    """Labels recovered once from the last layer's gradient, then held fixed
    (:func:`attacks.labels.recover_labels`: iDLG §3.1, count estimation for batches)."""

    def prepare(self, view: ServerView, num_images: int, gen: torch.Generator) -> KnownLabels:
        """Recover the labels; draws the recovery's dummy inputs from ``gen``."""
        return KnownLabels(torch.from_numpy(recover_labels(view, num_images, gen)))


def uniform_images(
    problem: InversionProblem, n: int, gen: torch.Generator, labels: RestartLabels | None = None
) -> torch.Tensor:
    """Uniform random images in the data range: the attack's starting point.

    The reference codes draw N(0, 1); uniform keeps the start inside the scored range.
    Drawn on the CPU generator (the same start on every device), then moved to the device.
    """
    u = torch.rand((n, *problem.input_shape), generator=gen)
    return (problem.low + (problem.high - problem.low) * u).to(problem.device)


def analytic_images(
    problem: InversionProblem, n: int, gen: torch.Generator, labels: RestartLabels | None = None
) -> torch.Tensor:
    """The analytic attack's images (:mod:`attacks.inversion.analytic`) for the attack's
    known labels (recovered here when the labels are not known before the restarts); uniform
    images where the model has no first linear layer. Every restart starts from them."""
    from attacks.inversion.analytic import first_layer

    layer = first_layer(problem.model, problem.input_shape)
    if layer is None:
        return uniform_images(problem, n, gen)
    known = labels.labels.numpy() if isinstance(labels, KnownLabels) else None
    if known is None or len(known) != n:
        known = recover_labels(problem.view, n, gen)
    else:  # labels known before the restarts: one solution serves every restart
        key = known.astype(np.int64).tobytes()
        if key not in problem.starts:
            problem.starts[key] = _solved(problem, known, layer)
        return problem.starts[key].clone()
    return _solved(problem, known, layer)


def _solved(problem: InversionProblem, labels: np.ndarray, layer: FirstLayer) -> torch.Tensor:
    """The analytic attack's images for ``labels``, float32 on the problem's device."""
    from attacks.inversion.analytic import analytic_images as solve

    images = solve(problem.view, problem, labels, layer)
    return torch.as_tensor(images, dtype=torch.float32).to(problem.device)


@dataclass(frozen=True)
class GradientMatcher:
    """A gradient-matching attack composed of its parts (see the module docstring)."""

    distance: Distance
    labels: LabelStrategy
    optimiser: Optimiser
    regularisers: tuple[Regulariser, ...] = ()
    boxed: bool = False
    initialise: Initialisation = uniform_images
    anchored: bool = False  # the start is informative: fit the clip weights to it
    early_stop: float = 0.0  # relative residual decrease per check below which to stop; 0: off

    def run(
        self,
        view: ServerView,
        *,
        iterations: int,
        restarts: int,
        generator: torch.Generator,
        num_images: int,
        device: torch.device,
    ) -> Trial:
        """Match the view's gradient from ``restarts`` starts; keep the least final distance.

        Parameters
        ----------
        view
            The server's view of the update.
        iterations, restarts, generator, num_images, device
            See :func:`attacks.registry.run_attack`.
        """
        problem = InversionProblem(view, device)
        labels = self.labels.prepare(view, num_images, generator)
        best = self.trial(problem, labels, num_images, iterations, generator)
        for _ in range(restarts - 1):
            trial = self.trial(problem, labels, num_images, iterations, generator)
            if rank_key(trial.loss) < rank_key(best.loss):
                best = trial
        return best

    def trial(
        self,
        problem: InversionProblem,
        labels: RestartLabels,
        num_images: int,
        iterations: int,
        generator: torch.Generator,
    ) -> Trial:
        """One restart: a fresh start drawn from ``generator``, ``iterations`` optimiser steps;
        its loss is the final distance, without the regularisers."""
        x = self.initialise(problem, num_images, generator, labels).requires_grad_(True)
        start = _to_numpy(x, problem)
        trial_labels = labels.start(problem, num_images, generator)
        # a clipped release weighs example i by its clip factor: free positive weights e^ω_i
        log_w = (torch.zeros(num_images, device=problem.device, requires_grad=True)
                 if problem.clipped else None)
        self._anchor(problem, x, trial_labels, log_w)

        def distance(precise: bool = False) -> torch.Tensor:
            weights = None if log_w is None else (WEIGHT_STEP * log_w).exp()
            grads = problem.gradient(x, trial_labels.targets(), weights, precise=precise)
            target = problem.at_precision(precise).target  # float64's kept by the problem
            return self.distance(grads, target)

        def objective() -> torch.Tensor:
            loss = distance()
            for regulariser in self.regularisers:
                loss = loss + regulariser(x)
            return loss

        def project() -> None:
            if self.boxed:
                with torch.no_grad():
                    problem.clamp_(x)

        extra = [] if log_w is None else [log_w]
        self.optimiser.minimise(objective, [x, *trial_labels.variables, *extra], iterations,
                                project, self._converged(distance))
        return Trial(
            reconstructions=_to_numpy(x, problem),
            labels=trial_labels.found(),
            start=start,
            loss=float(distance(precise=True).detach()),
        )

    def _converged(self, distance: Callable[[bool], torch.Tensor]
                   ) -> Callable[[], bool] | None:
        """The early-stop test (``early_stop`` > 0): the float64 matching distance, without
        the regularisers, fell by less than ``early_stop`` of itself since the last ask (or
        reached 0). Float64 because near the truth the distance (~1e-11) is below float32
        resolution (~5e-7 relative)."""
        if self.early_stop <= 0:
            return None
        last: list[float] = []

        def converged() -> bool:
            value = float(distance(True).detach())
            previous = last[-1] if last else math.inf
            last[:] = [value]
            return not value > 0 or previous - value < self.early_stop * previous

        return converged

    def _anchor(self, problem: InversionProblem, x: torch.Tensor, labels: TrialLabels,
                log_w: torch.Tensor | None) -> None:
        """When ``anchored`` and the release is clipped: start the free clip weights at those
        that best explain the release for the starting images
        (:meth:`InversionProblem.fitted_weights`) instead of 1. From the analytic start the
        weights at 1 are far off and the images move to make up for them (batch 128, C = 1,
        200 iterations: residual 3e-4, SSIM 0.83); from the fitted ones the residual falls to
        2e-7 and the start's SSIM (0.85) is kept. Holding each class's mean image at its
        start instead kept the residual where it started (1e-6 at batch 32), above plain
        IGA's, so the selection by residual lost it."""
        if not self.anchored or log_w is None:
            return
        found = torch.as_tensor(labels.found(), device=problem.device)
        fitted = problem.fitted_weights(x.detach().double(), found)
        with torch.no_grad():
            log_w.copy_(fitted.clamp_min(1e-3).log().float() / WEIGHT_STEP)


def _to_numpy(images: torch.Tensor, problem: InversionProblem) -> np.ndarray:
    """Detach, clip to the data range and return float32 numpy (on the CPU)."""
    return images.detach().clamp(problem.low, problem.high).cpu().numpy().astype(np.float32)
