"""The optimisers of the gradient matcher (:mod:`attacks.inversion.matching`).

Each minimises an objective over the dummy variables (images first) for a fixed number of
iterations, calling ``project`` after every step (the matcher's projection onto the data
range when it is ``boxed``, otherwise nothing). With a ``converged`` test (the matcher's early
stop, ``audit.early_stop``), asked every :data:`CHECK_EVERY` iterations, L-BFGS stops when it
says so; signed Adam first brings its next learning-rate decay forward and stops only when it
has converged after the last one, so a plateau at a large step is not taken for the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fedpriv.errors import InputError
from fedpriv.validate import check_in_range, check_int_range, check_positive

__all__ = ["CHECK_EVERY", "EARLY_STOP", "LBFGS", "LBFGS_OPTIONS", "SignedAdam", "check_early_stop"]

_DECAY_POINTS = (3 / 8, 5 / 8, 7 / 8)
#: Iterations between two asks of the ``converged`` test (each costs about one float64
#: evaluation of the matching distance).
CHECK_EVERY = 100
Converged = Callable[[], bool]


#: The default early stop of the optimisation attacks (``audit.early_stop``): off in the library
#: (a call runs its whole budget, as published); the auditor's default is set in its config.
EARLY_STOP = 0.0


def check_early_stop(key: str, value: object) -> float:
    """``early_stop``: a relative decrease in [0, 0.5] (0 disables the early stop)."""
    return check_in_range(key, value, 0.0, 0.5, "0 disables the early stop")


def _due(iteration: int, converged: Converged | None) -> bool:
    return converged is not None and (iteration + 1) % CHECK_EVERY == 0 and converged()


def check_line_search(key: str, value: object) -> str | None:
    """L-BFGS line search: ``None`` or ``"strong_wolfe"`` (torch's choices)."""
    if value not in (None, "strong_wolfe"):
        raise InputError(key, value, "None or 'strong_wolfe'")
    return value  # type: ignore[return-value]


def check_history_size(key: str, value: object) -> int:
    """L-BFGS history: an integer in [1, 10,000]."""
    return check_int_range(key, value, 1, 10_000)


LBFGS_OPTIONS = {"lr": check_positive, "history_size": check_history_size,
                 "line_search": check_line_search, "early_stop": check_early_stop}


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
        converged: Converged | None = None,
    ) -> None:
        """``iterations`` L-BFGS steps on the exact gradient of ``objective``; fewer when
        ``converged`` says so (module docstring)."""
        opt = torch.optim.LBFGS(variables, max_iter=1, lr=self.lr,
                                history_size=self.history_size, line_search_fn=self.line_search)

        def closure() -> torch.Tensor:
            loss = objective()
            for var, grad in zip(variables, torch.autograd.grad(loss, variables), strict=True):
                var.grad = grad
            return loss

        for i in range(iterations):
            opt.step(closure)
            project()
            if _due(i, converged):
                return


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
        converged: Converged | None = None,
    ) -> None:
        """``iterations`` Adam steps on sign(∇ ``objective``) with the step-decay schedule;
        fewer when ``converged`` says so after the last decay (module docstring)."""
        opt = torch.optim.Adam(variables, lr=self.lr)
        milestones = [int(iterations * f) for f in _DECAY_POINTS]
        for i in range(iterations):
            while milestones and i >= milestones[0]:  # as MultiStepLR(gamma=0.1)
                milestones.pop(0)
                _decay(opt)
            grads = torch.autograd.grad(objective(), variables)
            for var, grad in zip(variables, grads, strict=True):
                var.grad = grad.sign()
            opt.step()
            project()
            if _due(i, converged):
                if not milestones:
                    return
                milestones.pop(0)  # converged at this step size: the next decay now
                _decay(opt)


def _decay(opt: torch.optim.Optimizer) -> None:
    for group in opt.param_groups:
        group["lr"] *= 0.1
