"""Argument checks shared by the leakage modules; each raises :class:`InputError`."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fedpriv.errors import InputError

__all__ = ["as_alpha", "check_dim", "check_nonnegative", "check_positive"]


def as_alpha(alpha: npt.ArrayLike) -> np.ndarray:
    """``alpha`` as a float array, checked to lie in [0, 1] (type-I errors)."""
    a = np.asarray(alpha, dtype=float)
    if np.any(~(a >= 0.0) | ~(a <= 1.0)):
        raise InputError("alpha", alpha, "type-I errors in [0, 1]")
    return a


def check_dim(key: str, dim: int, minimum: int = 1) -> int:
    """An integer dimension ``>= minimum``."""
    try:
        whole = not isinstance(dim, bool) and float(dim) == int(dim)
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or dim < minimum:
        raise InputError(key, dim, f"an integer >= {minimum}")
    return int(dim)


def check_positive(key: str, value: float) -> float:
    """A finite number ``> 0``."""
    v = float(value)
    if not (math.isfinite(v) and v > 0.0):
        raise InputError(key, value, "a finite number > 0")
    return v


def check_nonnegative(key: str, value: float) -> float:
    """A finite number ``>= 0``."""
    v = float(value)
    if not (math.isfinite(v) and v >= 0.0):
        raise InputError(key, value, "a finite number >= 0")
    return v
