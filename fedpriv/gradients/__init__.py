"""Per-example gradients and their clipping: what a mechanism's release is computed from.

:func:`gradient_source` picks, per model, how one batch's gradients are held
(:mod:`fedpriv.gradients.source`); :mod:`fedpriv.gradients.clipping` is the one place clipped
sums are computed. Importing this package imports torch.
"""

from fedpriv.gradients.canary_source import CanaryGradients
from fedpriv.gradients.linear import is_all_linear
from fedpriv.gradients.loss import Loss, cross_entropy
from fedpriv.gradients.source import (
    GradientSource,
    LinearFactorGradients,
    PerExampleGradients,
    gradient_source,
    per_example_gradients,
)
from fedpriv.gradients.vmap import vmap_per_example_gradients

__all__ = [
    "CanaryGradients",
    "GradientSource",
    "LinearFactorGradients",
    "Loss",
    "PerExampleGradients",
    "cross_entropy",
    "gradient_source",
    "is_all_linear",
    "per_example_gradients",
    "vmap_per_example_gradients",
]
