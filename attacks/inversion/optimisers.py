"""The optimisers of the gradient matcher (:mod:`attacks.inversion.matching`).

Each minimises an objective over the dummy variables (images first) for a fixed number of
iterations, calling ``project`` after every step (the matcher's projection onto the data
range when it is ``boxed``, otherwise nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fedpriv.errors import InputError
from fedpriv.validate import check_int_range, check_positive

__all__ = ["LBFGS", "LBFGS_OPTIONS", "SignedAdam"]

_DECAY_POINTS = (3 / 8, 5 / 8, 7 / 8)


def check_line_search(key: str, value: object) -> str | None:
    """L-BFGS line search: ``None`` or ``"strong_wolfe"`` (torch's choices)."""
    if value not in (None, "strong_wolfe"):
        raise InputError(key, value, "None or 'strong_wolfe'")
    return value  # type: ignore[return-value]


def check_history_size(key: str, value: object) -> int:
    """L-BFGS history: an integer in [1, 10,000]."""
    return check_int_range(key, value, 1, 10_000)


LBFGS_OPTIONS = {"lr": check_positive, "history_size": check_history_size,
                 "line_search": check_line_search}


@dataclass(frozen=True)
class LBFGS:
    """``torch.optim.LBFGS`` with one update per iteration (``max_iter=1``, one matching
    evaluation without line search); the defaults are the DLG reference code's (lr 1,
    history 100, no line search; Zhu et al. 2019, Algorithm 1)."""

    lr: float = 1.0
    history_size: int = 100
    line_search: str | None = None

    def minimise(
        self,
        objective: Callable[[], torch.Tensor],
        variables: list[torch.Tensor],
        iterations: int,
        project: Callable[[], None],
    ) -> None:
        """``iterations`` L-BFGS steps on the exact gradient of ``objective``."""
        opt = torch.optim.LBFGS(variables, max_iter=1, lr=self.lr,
                                history_size=self.history_size, line_search_fn=self.line_search)

        def closure() -> torch.Tensor:
            loss = objective()
            for var, grad in zip(variables, torch.autograd.grad(loss, variables), strict=True):
                var.grad = grad
            return loss

        for _ in range(iterations):
            opt.step(closure)
            project()


@dataclass(frozen=True)
class SignedAdam:
    """Adam on the *sign* of the gradient, learning rate ×0.1 at 3/8, 5/8 and 7/8 of the
    iterations, as in Geiping et al.'s reference code (``inversefed``)."""

    lr: float = 0.1

    def minimise(
        self,
        objective: Callable[[], torch.Tensor],
        variables: list[torch.Tensor],
        iterations: int,
        project: Callable[[], None],
    ) -> None:
        """``iterations`` Adam steps on sign(∇ ``objective``) with the step-decay schedule."""
        opt = torch.optim.Adam(variables, lr=self.lr)
        milestones = [int(iterations * f) for f in _DECAY_POINTS]
        schedule = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.1)
        for _ in range(iterations):
            grads = torch.autograd.grad(objective(), variables)
            for var, grad in zip(variables, grads, strict=True):
                var.grad = grad.sign()
            opt.step()
            schedule.step()
            project()
