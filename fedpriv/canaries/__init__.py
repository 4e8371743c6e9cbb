"""Canary audits: empirical lower bounds on ε beside the accountant's upper bound.

Gradient canaries (:mod:`~fedpriv.canaries.design`) are inserted into a client's clipped sums
with secret ½-inclusion. Pure NumPy; no Flower, no torch.
"""

from fedpriv.canaries.design import (
    CanaryDesign,
    augmented_batch_size,
    canary_displacement,
    canary_sum,
    directions,
    inclusion,
)

__all__ = [
    "CanaryDesign",
    "augmented_batch_size",
    "canary_displacement",
    "canary_sum",
    "directions",
    "inclusion",
]
