"""Canary audits: empirical lower bounds on ε beside the accountant's upper bound.

Gradient canaries (:mod:`~fedpriv.canaries.design`) are inserted into a client's clipped sums
with secret ½-inclusion; the server scores them in each release
(:mod:`~fedpriv.canaries.scores`). Pure NumPy; no Flower, no torch.
"""

from fedpriv.canaries.design import (
    CanaryDesign,
    augmented_batch_size,
    canary_displacement,
    canary_sum,
    directions,
    inclusion,
)
from fedpriv.canaries.scores import gaussian_scores, laplace_scores, projections, vmf_scores

__all__ = [
    "CanaryDesign",
    "augmented_batch_size",
    "canary_displacement",
    "canary_sum",
    "directions",
    "gaussian_scores",
    "inclusion",
    "laplace_scores",
    "projections",
    "vmf_scores",
]
