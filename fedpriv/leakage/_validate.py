"""The type-I-error grid check of the trade-off modules (other checks: :mod:`fedpriv.validate`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fedpriv.errors import InputError

__all__ = ["as_alpha"]


def as_alpha(alpha: npt.ArrayLike) -> np.ndarray:
    """``alpha`` as a float array, checked to lie in [0, 1] (type-I errors)."""
    a = np.asarray(alpha, dtype=float)
    if np.any(~(a >= 0.0) | ~(a <= 1.0)):
        raise InputError("alpha", alpha, "type-I errors in [0, 1]")
    return a
