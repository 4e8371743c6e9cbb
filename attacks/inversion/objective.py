"""What the gradient-matching attacks minimise: the problem, the distances, the regularisers.

The client releases the gradient of the batch-mean cross-entropy loss of the model's logits
(privatised); the attacks search for inputs whose gradient at θ matches the released one.
:class:`InversionProblem` holds what one view poses (model at θ, released gradient g̃, input
domain); the distances compare two gradients and the regularisers score the images alone.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from attacks.view import ServerView
from fedpriv.optimizer_settings import OptimizerSettings

__all__ = [
    "InversionProblem",
    "TotalVariation",
    "cosine_distance",
    "l2_distance",
    "total_variation",
]


def _declared_clipping(view: ServerView) -> tuple[bool, tuple[float, int] | None]:
    """Whether the view's declared mechanism clips each example's gradient (public), and its
    single per-example bound ``(C, norm order)`` (None under per-layer bounds or none)."""
    from fedpriv.mechanisms import build_mechanism

    mechanism = build_mechanism(view.mechanism, view.mechanism_params)
    bounds = getattr(mechanism, "clip_bounds", None)
    if bounds is None or mechanism.level != "record":
        return False, None
    single = (float(bounds[0]), int(mechanism.norm_ord)) if len(bounds) == 1 else None
    return True, single


@dataclass
class Precision:
    """The model, its parameters and the target in one dtype (the float64 copy is made on
    first use)."""

    model: torch.nn.Module
    params: list[torch.Tensor]
    target: list[torch.Tensor]


class InversionProblem:
    """The model at θ, the released gradient g̃ and the input domain of one view, on
    ``device``, where the attack's optimisation runs.

    With ``local_steps = K > 1`` declared, the release is the pseudo-gradient
    ``(θ − θ_K)/(ηK)`` of K local steps (privacy-math.md §1): :meth:`gradient` then replays
    the K steps of the declared optimiser (plain SGD unless the view declares another; SGD's
    momentum, Nesterov and weight decay, Adam/AdamW with the default betas) from θ on the
    dummy batch, differentiably, and returns the same pseudo-gradient of the dummies. Every
    step uses the whole dummy batch (as :func:`attacks.simulate.simulate_view`'s client
    does; a client sampling a fresh batch each step is matched only approximately).
    """

    def __init__(self, view: ServerView, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.view = view
        self.model = view.build_model().to(self.device)
        self.params = list(self.model.parameters())
        self.target = [torch.from_numpy(g).to(self.device) for g in view.gradient()]
        self.input_shape = view.input_shape
        self.num_classes = view.num_classes
        self.low, self.high = view.data_range
        self.clipped, self.record_clip = _declared_clipping(view)
        self.steps = int(view.local_steps)
        self.lr = float(view.learning_rate)
        self.optimizer = view.optimizer
        #: starting images computed once and shared by restarts (matching.analytic_images)
        self.starts: dict[bytes, torch.Tensor] = {}
        self._single = Precision(self.model, self.params, self.target)
        self._double: Precision | None = None

    def at_precision(self, precise: bool) -> Precision:
        """The model, parameters and target in float32 (as the view), or float64 if
        ``precise``."""
        if not precise:
            return self._single
        if self._double is None:
            model = copy.deepcopy(self.model).double()
            self._double = Precision(model, list(model.parameters()),
                                     [t.double() for t in self.target])
        return self._double

    def gradient(
        self, images: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor | None = None,
        *, precise: bool = False,
    ) -> tuple[torch.Tensor, ...]:
        """∇θ of the batch-mean cross-entropy at ``images`` (the pseudo-gradient of the
        declared K local steps when K > 1), differentiable in the inputs.

        ``targets`` are class indices (int64) or class probabilities (soft labels);
        ``weights`` (positive, one per image) scale each example's loss: the clip factors
        ``min(1, C/‖g_i‖)`` of a clipped release, which the attack estimates. ``precise``
        computes in float64 (restart and attack selection: the matching loss at the truth
        is below float32 resolution).
        """
        chosen = self.at_precision(precise)
        if precise:
            images = images.double()
            targets = targets.double() if targets.is_floating_point() else targets
            weights = None if weights is None else weights.double()
        if self.steps == 1:
            return _step_gradient(chosen.model, chosen.params, images, targets, weights, None)
        return self._unrolled(chosen, images, targets, weights)

    def _unrolled(self, chosen: Precision, images: torch.Tensor, targets: torch.Tensor,
                  weights: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        names = [name for name, _ in chosen.model.named_parameters()]
        start = list(chosen.params)
        current = list(start)
        step = _optimiser_step(self.optimizer, self.lr)
        state: dict[str, Any] = {}
        for t in range(self.steps):
            values = dict(zip(names, current, strict=True))
            grads = _step_gradient(chosen.model, current, images, targets, weights, values)
            current = step(current, list(grads), state, t + 1)
        scale = 1.0 / (self.lr * self.steps)
        return tuple(scale * (a - b) for a, b in zip(start, current, strict=True))

    def residual(self, images: np.ndarray, labels: np.ndarray) -> float:
        """1 − cos between the release and the (pseudo-)gradient of ``images`` with hard
        ``labels``, in float64: one criterion every attack's result can be ranked by, without
        ground truth (``audit.attacks = ["strongest"]``). Under declared per-example clipping
        each example carries the weight in [0, 1] that best explains the release
        (:meth:`fitted_weights`), as the matcher's free clip weights do: the clip factors
        ``min(1, C/‖g_i‖)`` of the candidates themselves misjudge candidates that are right
        on average, such as class means (batch 128, C = 1: residual 5e-3 for the analytic
        class means, SSIM 0.85, against 4e-3 for IGA's images, SSIM 0.51)."""
        if not np.all(np.isfinite(images)):
            return math.inf  # a diverged attack (DLG's L-BFGS can) is never kept
        x = torch.as_tensor(np.asarray(images), dtype=torch.float64, device=self.device)
        y = torch.as_tensor(np.asarray(labels), dtype=torch.int64, device=self.device)
        weights = self.fitted_weights(x, y) if self.clipped else None
        grads = self.gradient(x, y, weights, precise=True)
        return float(cosine_distance(grads, self.at_precision(True).target).detach())

    def _per_example(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Flattened per-example gradients at θ, float64, ``(n, p)``, by the library's route
        for the model (:func:`fedpriv.gradients.per_example_gradients`: rank-one factors for
        an all-linear model, ``torch.func`` otherwise) in one batched pass."""
        from fedpriv.gradients import per_example_gradients

        return per_example_gradients(self.at_precision(True).model, x, y)[0]

    def clip_factors(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``min(1, C/‖g_i‖)`` of each example at θ (float64) under the declared bound."""
        from fedpriv.gradients.clipping import clip_factors

        assert self.record_clip is not None
        bound, norm_ord = self.record_clip
        return clip_factors(self._per_example(x, y), bound, norm_ord)

    def fitted_weights(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-example weights in [0, 1] (the range of clip factors) that best explain the
        release at θ: bounded least squares of ``(1/n) Σ w_i g_i ≈ g̃`` (float64)."""
        from scipy.optimize import lsq_linear

        rows = self._per_example(x, y).detach().cpu().numpy()
        target = torch.cat([t.reshape(-1) for t in self.at_precision(True).target])
        fit = lsq_linear(rows.T / len(x), target.cpu().numpy(), bounds=(0.0, 1.0))
        return torch.as_tensor(fit.x, dtype=torch.float64, device=self.device)

    def clamp_(self, images: torch.Tensor) -> torch.Tensor:
        """Project onto the data range in place."""
        return images.clamp_(self.low, self.high)


def _step_gradient(
    model: torch.nn.Module, params: Sequence[torch.Tensor], images: torch.Tensor,
    targets: torch.Tensor, weights: torch.Tensor | None, values: dict[str, torch.Tensor] | None,
) -> tuple[torch.Tensor, ...]:
    """One step's gradient of the (clip-weighted) batch-mean cross-entropy, with the graph
    kept; at ``values`` (a functional call) when given, else at the model's parameters."""
    logits = model(images) if values is None else functional_call(model, values, (images,))
    if weights is None:
        loss = F.cross_entropy(logits, targets)
    else:
        loss = (weights * F.cross_entropy(logits, targets, reduction="none")).mean()
    return torch.autograd.grad(loss, list(params), create_graph=True)


Step = Callable[[list[torch.Tensor], list[torch.Tensor], dict[str, Any], int],
                list[torch.Tensor]]


def _optimiser_step(settings: OptimizerSettings | None, lr: float) -> Step:
    """One differentiable step of the declared local optimiser, as ``torch.optim`` takes it
    (:class:`fedpriv.training.LocalOptimizer`: fresh state every round, Adam's betas at
    their defaults since the server is not told them)."""
    s = settings or OptimizerSettings()
    if s.name in ("adam", "adamw"):
        beta1, beta2, eps = 0.9, 0.999, 1e-8

        def adam(params: list[torch.Tensor], grads: list[torch.Tensor], state: dict[str, Any],
                 t: int) -> list[torch.Tensor]:
            if s.name == "adam" and s.weight_decay:
                grads = [g + s.weight_decay * p for g, p in zip(grads, params, strict=True)]
            if s.name == "adamw" and s.weight_decay:
                params = [p * (1 - lr * s.weight_decay) for p in params]
            m = [beta1 * a + (1 - beta1) * g for a, g in
                 zip(state.get("m", [0.0] * len(grads)), grads, strict=True)]
            v = [beta2 * a + (1 - beta2) * g * g for a, g in
                 zip(state.get("v", [0.0] * len(grads)), grads, strict=True)]
            state["m"], state["v"] = m, v
            c1, c2 = 1 - beta1**t, 1 - beta2**t
            return [p - lr * (a / c1) / ((b / c2).sqrt() + eps)
                    for p, a, b in zip(params, m, v, strict=True)]

        return adam

    def sgd(params: list[torch.Tensor], grads: list[torch.Tensor], state: dict[str, Any],
            t: int) -> list[torch.Tensor]:
        if s.weight_decay:
            grads = [g + s.weight_decay * p for g, p in zip(grads, params, strict=True)]
        if s.momentum:
            bufs = grads if t == 1 else [s.momentum * b + g for b, g in
                                         zip(state["buf"], grads, strict=True)]
            state["buf"] = bufs
            grads = ([g + s.momentum * b for g, b in zip(grads, bufs, strict=True)]
                     if s.nesterov else bufs)
        return [p - lr * g for p, g in zip(params, grads, strict=True)]

    return sgd


def l2_distance(grads: Sequence[torch.Tensor], target: Sequence[torch.Tensor]) -> torch.Tensor:
    """Σ_layers ‖∇θL(x') − g̃‖² (Zhu et al. 2019, "Deep leakage from gradients", eq. 4)."""
    return sum(((g - t) ** 2).sum() for g, t in zip(grads, target, strict=True))


def cosine_distance(grads: Sequence[torch.Tensor], target: Sequence[torch.Tensor]) -> torch.Tensor:
    """1 − cos(∇θL(x'), g̃) over all parameters jointly (Geiping et al. 2020, eq. 4)."""
    dot = sum((g * t).sum() for g, t in zip(grads, target, strict=True))
    g_norm = torch.sqrt(sum((g**2).sum() for g in grads))
    t_norm = torch.sqrt(sum((t**2).sum() for t in target))
    return 1.0 - dot / (g_norm * t_norm).clamp_min(torch.finfo(dot.dtype).tiny)


def total_variation(images: torch.Tensor) -> torch.Tensor:
    """Anisotropic TV as in Geiping et al.'s reference code: mean |∂x| + mean |∂y|."""
    dx = (images[..., :, 1:] - images[..., :, :-1]).abs().mean()
    dy = (images[..., 1:, :] - images[..., :-1, :]).abs().mean()
    return dx + dy


@dataclass(frozen=True)
class TotalVariation:
    """The regulariser α_TV·TV(x') of Geiping et al. 2020, eq. 4 (:func:`total_variation`)."""

    weight: float

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """α_TV·TV(``images``)."""
        return self.weight * total_variation(images)
