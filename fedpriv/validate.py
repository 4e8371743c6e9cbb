"""Argument checks shared by the numeric modules (accounting, leakage); each raises
:class:`~fedpriv.errors.InputError` naming the argument, the value and what is allowed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedpriv.errors import InputError

__all__ = [
    "check_choice",
    "check_dim",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "check_rate",
    "check_scores",
    "number",
]


def number(value: Any) -> float:
    """``value`` as a float, or NaN when it is not a number (so range checks refuse it)."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def check_positive(key: str, value: Any) -> float:
    """A finite number ``> 0``."""
    v = number(value)
    if not (math.isfinite(v) and v > 0.0):
        raise InputError(key, value, "a finite number > 0")
    return v


def check_nonnegative(key: str, value: Any) -> float:
    """A finite number ``>= 0``."""
    v = number(value)
    if not (math.isfinite(v) and v >= 0.0):
        raise InputError(key, value, "a finite number >= 0")
    return v


def check_dim(key: str, dim: Any, minimum: int = 1) -> int:
    """An integer ``>= minimum`` (a dimension or a count; ``1e5`` is accepted, ``2.5`` not)."""
    try:
        whole = not isinstance(dim, bool) and float(dim) == int(dim)
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or dim < minimum:
        raise InputError(key, dim, f"an integer >= {minimum}")
    return int(dim)


def check_rate(key: str, rate: Any) -> float:
    """A Poisson sampling rate in ``(0, 1]``."""
    q = number(rate)
    if not 0.0 < q <= 1.0:
        raise InputError(key, rate, "a sampling rate in (0, 1]")
    return q


def check_probability(key: str, value: Any) -> float:
    """A probability strictly inside ``(0, 1)`` (a δ, a confidence level)."""
    v = number(value)
    if not 0.0 < v < 1.0:
        raise InputError(key, value, "a number in (0, 1)")
    return v


def check_choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise InputError(key, value, f"one of {', '.join(choices)}")
    return value


def check_scores(key: str, values: Any) -> np.ndarray:
    """A non-empty one-dimensional array of finite numbers, as float64."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(key, type(values).__name__, "a 1-D array of numbers") from None
    if array.ndim != 1 or array.size == 0:
        raise InputError(key, f"an array of shape {array.shape}", "a non-empty 1-D array")
    if not np.all(np.isfinite(array)):
        raise InputError(key, "an array with non-finite entries", "finite numbers only")
    return array
