"""Inverting Gradients (Geiping, Bauermeister, Dröge & Moeller, NeurIPS 2020).

Minimise 1 − cos(∇θL(x', y), g̃) + α_TV·TV(x') over the images x' (Geiping et al. 2020,
eq. 4), labels y recovered analytically (:mod:`attacks.labels`). As in the reference code
(``inversefed``): Adam with lr 0.1 on the *sign* of the gradient, learning rate ×0.1 at 3/8,
5/8 and 7/8 of the iterations, images clamped to the data range after every step, several
restarts of which the one with the least final cosine matching loss is kept. The default
TV weight is the reference configuration's 0.2 (notes/libraries.md).
"""

from __future__ import annotations

import torch

from attacks.inversion.objective import (
    GradientMatcher,
    best_trial,
    cosine_distance,
    to_numpy_images,
    total_variation,
)
from attacks.labels import recover_labels
from attacks.registry import attack
from attacks.result import Trial
from attacks.view import ServerView
from fedpriv.validate import check_nonnegative, check_positive

__all__ = ["iga"]

_DECAY_POINTS = (3 / 8, 5 / 8, 7 / 8)


def _iga_trial(
    matcher: GradientMatcher,
    labels: torch.Tensor,
    iterations: int,
    generator: torch.Generator,
    tv_weight: float,
    lr: float,
) -> Trial:
    targets = labels.to(matcher.device)
    x = matcher.initial_images(len(labels), generator).requires_grad_(True)
    prior = to_numpy_images(x, matcher.low, matcher.high)
    opt = torch.optim.Adam([x], lr=lr)
    milestones = [int(iterations * f) for f in _DECAY_POINTS]
    schedule = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.1)
    for _ in range(iterations):
        objective = cosine_distance(matcher.gradient(x, targets), matcher.target)
        objective = objective + tv_weight * total_variation(x)
        (grad,) = torch.autograd.grad(objective, [x])
        x.grad = grad.sign()
        opt.step()
        schedule.step()
        with torch.no_grad():
            matcher.clamp_(x)
    loss = cosine_distance(matcher.gradient(x, targets), matcher.target)
    return Trial(
        reconstructions=to_numpy_images(x, matcher.low, matcher.high),
        labels=labels.numpy().copy(),
        prior=prior,
        loss=float(loss.detach()),
    )


@attack("iga", tv_weight=check_nonnegative, lr=check_positive)
def iga(
    view: ServerView,
    *,
    iterations: int,
    restarts: int,
    generator: torch.Generator,
    num_images: int,
    device: torch.device,
    tv_weight: float = 0.2,
    lr: float = 0.1,
) -> Trial:
    """Inverting gradients with analytic labels; best restart by cosine matching loss.

    Parameters
    ----------
    view
        The server's view of the update.
    iterations, restarts, generator, num_images, device
        See :func:`attacks.registry.run_attack`.
    tv_weight
        α_TV ≥ 0, weight of the total-variation prior.
    lr
        Initial Adam learning rate.
    """
    matcher = GradientMatcher(view, device)
    labels = torch.from_numpy(recover_labels(view, num_images, generator))
    return best_trial(
        lambda: _iga_trial(matcher, labels, iterations, generator, tv_weight, lr), restarts
    )
