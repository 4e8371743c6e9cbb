"""Inverting Gradients (Geiping, Bauermeister, Dröge & Moeller, NeurIPS 2020).

Minimise 1 − cos(∇θL(x', y), g̃) + α_TV·TV(x') over the images x' (Geiping et al. 2020,
eq. 4), labels y recovered analytically (:mod:`attacks.labels`). As in the reference code
(``inversefed``): Adam with lr 0.1 on the *sign* of the gradient, learning rate ×0.1 at 3/8,
5/8 and 7/8 of the iterations, images clamped to the data range after every step, several
restarts of which the one with the least final cosine matching loss is kept. The default
TV weight is the reference configuration's 0.2.
"""

from __future__ import annotations

from attacks.inversion.matching import AnalyticLabels, GradientMatcher
from attacks.inversion.objective import TotalVariation, cosine_distance
from attacks.inversion.optimisers import SignedAdam
from attacks.registry import attack
from fedpriv.validate import check_nonnegative, check_positive

__all__ = ["iga"]


@attack("iga", tv_weight=check_nonnegative, lr=check_positive)
def iga(tv_weight: float = 0.2, lr: float = 0.1) -> GradientMatcher:
    """Inverting gradients with analytic labels; best restart by cosine matching loss.

    Parameters
    ----------
    tv_weight
        α_TV ≥ 0, weight of the total-variation prior.
    lr
        Initial Adam learning rate.
    """
    return GradientMatcher(
        distance=cosine_distance,
        labels=AnalyticLabels(),
        optimiser=SignedAdam(lr),
        regularisers=(TotalVariation(tv_weight),),
        boxed=True,
    )
