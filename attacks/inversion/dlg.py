"""Deep Leakage from Gradients (Zhu, Liu & Han, NeurIPS 2019).

Minimise ‖∇θL(x', y') − g̃‖² over dummy inputs x' and dummy soft labels y' = softmax(ℓ')
with L-BFGS (Zhu et al. 2019, Algorithm 1 and eq. 4). The reference implementation uses
torch's L-BFGS with lr 1, history 100 and no line search; those are the defaults here, and one
"iteration" is one L-BFGS update (one gradient-matching evaluation without line search).
"""

from __future__ import annotations

import torch

from attacks.inversion.objective import GradientMatcher, best_trial, l2_distance, to_numpy_images
from attacks.registry import attack
from attacks.result import Trial
from attacks.view import ServerView
from fedpriv.errors import InputError
from fedpriv.validate import check_int_range, check_positive

__all__ = ["dlg", "lbfgs_trial"]


def lbfgs_trial(
    matcher: GradientMatcher,
    num_images: int,
    labels: torch.Tensor | None,
    iterations: int,
    generator: torch.Generator,
    options: dict,
) -> Trial:
    """One L-BFGS gradient-matching run; soft labels are optimised when ``labels`` is None."""
    x = matcher.initial_images(num_images, generator).requires_grad_(True)
    prior = to_numpy_images(x, matcher.low, matcher.high)
    variables = [x]
    hard = None if labels is None else labels.to(matcher.device)
    if labels is None:
        shape = (num_images, matcher.num_classes)
        logits = torch.randn(shape, generator=generator).to(matcher.device).requires_grad_(True)
        variables.append(logits)
    opt = torch.optim.LBFGS(variables, max_iter=1, **options)

    def closure() -> torch.Tensor:
        targets = hard if hard is not None else torch.softmax(logits, dim=1)
        loss = l2_distance(matcher.gradient(x, targets), matcher.target)
        for var, grad in zip(variables, torch.autograd.grad(loss, variables), strict=True):
            var.grad = grad
        return loss

    for _ in range(iterations):
        opt.step(closure)
    final = float(closure().detach())
    found = labels if labels is not None else logits.detach().argmax(dim=1)
    return Trial(
        reconstructions=to_numpy_images(x, matcher.low, matcher.high),
        labels=found.cpu().numpy().astype("int64"),
        prior=prior,
        loss=final,
    )


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


@attack("dlg", **LBFGS_OPTIONS)
def dlg(
    view: ServerView,
    *,
    iterations: int,
    restarts: int,
    generator: torch.Generator,
    num_images: int,
    device: torch.device,
    lr: float = 1.0,
    history_size: int = 100,
    line_search: str | None = None,
) -> Trial:
    """DLG: joint L-BFGS on dummy images and dummy soft labels; best restart by loss.

    Parameters
    ----------
    view
        The server's view of the update.
    iterations, restarts, generator, num_images, device
        See :func:`attacks.registry.run_attack`.
    lr, history_size, line_search
        ``torch.optim.LBFGS`` settings (``line_search="strong_wolfe"`` or None).
    """
    matcher = GradientMatcher(view, device)
    options = {"lr": lr, "history_size": history_size, "line_search_fn": line_search}
    return best_trial(
        lambda: lbfgs_trial(matcher, num_images, None, iterations, generator, options), restarts
    )
