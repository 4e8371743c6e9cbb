"""The local optimiser a client applies to each privatised gradient, as Opacus does.

Opacus's ``DPOptimizer.step`` (``opacus/optimizers/optimizer.py``) clips and sums the
per-example gradients, adds the noise, divides by the expected batch size, stores the result in
``p.grad`` and only then calls the wrapped ``torch.optim`` optimiser. Everything the optimiser
adds — weight decay ``λθ`` (coupled L2, added to the gradient by ``torch.optim.SGD`` and
``torch.optim.Adam``), momentum, Adam's moment estimates — therefore acts on the *released*
gradient: it is post-processing of the mechanism's output and leaves the privacy of the release
unchanged. fedpriv does the same: the mechanism's release (plus FedProx's data-independent
proximal gradient, when asked for) becomes ``p.grad`` and a ``torch.optim`` optimiser steps.
``adamw`` (``torch.optim.AdamW``) decays the parameters directly, ``θ ← θ(1 − ηλ)``, apart
from the gradient (Loshchilov & Hutter, "Decoupled weight decay regularization", ICLR 2019):
also post-processing. The difference matters: with the paper presets' λ = 0.1 and η = 0.005,
coupled decay (``adam``) leaves the paper MLP at chance on Fashion-MNIST even without noise
(it trains the decay, not the data: 0.100 test accuracy), while decoupled decay trains it
(``configs/paper-fmnist.toml``, ``docs/results/paper-fmnist/study.md``).

State: the optimiser is created afresh at the start of every round's local training (its
momentum buffer or Adam moments start at zero and are dropped when the round ends). That is
the simplest honest choice for a federation, where the next round starts from the server's
aggregate rather than from this client's parameters; with one client and one round it is
exactly centralised DP-SGD, which is how the paper presets run (``configs/paper-fmnist*.toml``).
The server's checks know which optimisers they can see through
(:func:`fedpriv.verification.client_update`, ``fresh_state=True``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from fedpriv.optimizer_settings import OPTIMIZERS, OptimizerSettings
from fedpriv.training.config import TrainConfig, optimizer_settings

__all__ = ["LocalOptimizer", "PlainSGD", "local_optimizer"]


@dataclass(frozen=True)
class LocalOptimizer(OptimizerSettings):
    """Which ``torch.optim`` optimiser steps on the release: the declared
    :class:`~fedpriv.optimizer_settings.OptimizerSettings` (``name``, ``momentum``,
    ``nesterov``, ``weight_decay``), validated, plus Adam's and AdamW's ``betas``
    ``(β₁, β₂)``, which the server need not know."""

    betas: tuple[float, float] = (0.9, 0.999)

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.name!r}; one of {OPTIMIZERS}")
        if self.conflict() is not None:
            raise ValueError(f"momentum and nesterov are SGD's; {self.name} has none"
                             if self.name != "sgd" else "nesterov needs momentum > 0")

    @property
    def settings(self) -> OptimizerSettings:
        """What a client declares of this optimiser (everything but the betas)."""
        return OptimizerSettings(self.name, self.momentum, self.nesterov, self.weight_decay)

    def build(
        self, params: Iterable[torch.nn.Parameter], lr: float
    ) -> torch.optim.Optimizer | PlainSGD:
        """A fresh optimiser over ``params`` with learning rate ``lr`` (state at zero): plain
        SGD (no momentum, no weight decay, the default) as :class:`PlainSGD`, the same update
        in one operator."""
        if self.name == "sgd" and self.momentum == 0.0 and self.weight_decay == 0.0:
            return PlainSGD(params, lr)
        if self.name in ("adam", "adamw"):
            adam = torch.optim.Adam if self.name == "adam" else torch.optim.AdamW
            return adam(params, lr=lr, betas=self.betas, weight_decay=self.weight_decay)
        return torch.optim.SGD(params, lr=lr, momentum=self.momentum, nesterov=self.nesterov,
                               weight_decay=self.weight_decay)


class PlainSGD:
    """``θ ← θ − η·g`` for every parameter with a gradient ``g``: what ``torch.optim.SGD``
    does without momentum and weight decay (on the CPU, ``param.add_(grad, alpha=-lr)`` for each
    parameter), bit for bit, as one ``torch._foreach_add_`` and without the optimiser's
    per-step machinery. That machinery is cheap alone (≈ 15 µs a step for the paper MLP) but
    cost 35–75 µs a step inside a DP-SGD loop on a 2-CPU machine (benchmarks/dp_step.py,
    ``paired``: ``dp_ghost_torch_sgd``); plain SGD has no state, so there is nothing else to
    keep."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float) -> None:
        self.params = list(params)
        self.lr = lr

    def step(self) -> None:
        """One update from each parameter's ``.grad`` (parameters without one are skipped)."""
        grads = [p.grad for p in self.params]
        if any(g is None for g in grads):
            stepped = [p for p, g in zip(self.params, grads, strict=True) if g is not None]
            grads = [p.grad for p in stepped]
        else:
            stepped = self.params
        with torch.no_grad():
            torch._foreach_add_(stepped, grads, alpha=-self.lr)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's ``.grad``, as ``torch.optim.Optimizer.zero_grad`` does (a
        loop written against ``torch.optim`` runs unchanged)."""
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_()
                p.grad.zero_()


def local_optimizer(train: TrainConfig) -> LocalOptimizer:
    """The :class:`LocalOptimizer` the ``[train]`` settings describe."""
    s = optimizer_settings(train)
    return LocalOptimizer(s.name, s.momentum, s.nesterov, s.weight_decay,
                          (train.betas[0], train.betas[1]))
