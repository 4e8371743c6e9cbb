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
(it trains the decay, not the data), while decoupled decay trains it (``docs/study-fmnist.md``).

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

from fedpriv.protocol import OPTIMIZERS, optimizer_conflict
from fedpriv.training.config import TrainConfig

__all__ = ["LocalOptimizer", "local_optimizer"]


@dataclass(frozen=True)
class LocalOptimizer:
    """Which ``torch.optim`` optimiser steps on the release, with its hyper-parameters.

    Attributes
    ----------
    name
        ``"sgd"`` (``torch.optim.SGD``), ``"adam"`` (``torch.optim.Adam``) or ``"adamw"``
        (``torch.optim.AdamW``).
    momentum, nesterov
        SGD's momentum ``μ ∈ [0, 1)`` (dampening 0) and Nesterov's variant (needs ``μ > 0``).
    weight_decay
        ``λ ≥ 0``: ``λθ`` added to the released gradient (``sgd``, ``adam``: coupled L2, as
        ``torch.optim`` does), or ``θ ← θ(1 − ηλ)`` before the step (``adamw``: decoupled).
    betas
        Adam's and AdamW's ``(β₁, β₂)``.
    """

    name: str = "sgd"
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.name!r}; one of {OPTIMIZERS}")
        if optimizer_conflict(self.name, self.momentum, self.nesterov) is not None:
            raise ValueError(f"momentum and nesterov are SGD's; {self.name} has none"
                             if self.name != "sgd" else "nesterov needs momentum > 0")

    def build(self, params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
        """A fresh optimiser over ``params`` with learning rate ``lr`` (state at zero)."""
        if self.name in ("adam", "adamw"):
            adam = torch.optim.Adam if self.name == "adam" else torch.optim.AdamW
            return adam(params, lr=lr, betas=self.betas, weight_decay=self.weight_decay)
        return torch.optim.SGD(params, lr=lr, momentum=self.momentum, nesterov=self.nesterov,
                               weight_decay=self.weight_decay)


def local_optimizer(train: TrainConfig) -> LocalOptimizer:
    """The :class:`LocalOptimizer` the ``[train]`` settings describe."""
    return LocalOptimizer(train.optimizer, train.momentum, train.nesterov, train.weight_decay,
                          (train.betas[0], train.betas[1]))
