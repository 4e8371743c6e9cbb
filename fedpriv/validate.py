"""Argument checks shared by the numeric modules (accounting, leakage); each raises
:class:`~fedpriv.errors.InputError` naming the argument, the value and what is allowed."""

from __future__ import annotations

import math
from typing import Any

from fedpriv.errors import InputError

__all__ = [
    "check_dim",
    "check_in_range",
    "check_nonnegative",
    "check_positive",
    "check_rate",
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


def check_in_range(key: str, value: Any, low: float, high: float, why: str = "") -> float:
    """A finite number in ``[low, high]``; ``why`` says where the limits come from."""
    v = number(value)
    if not (math.isfinite(v) and low <= v <= high):
        reason = f" ({why})" if why else ""
        raise InputError(key, value, f"a number in [{low:g}, {high:g}]{reason}")
    return v


def check_dim(key: str, dim: Any, minimum: int = 1, maximum: float = math.inf) -> int:
    """An integer in ``[minimum, maximum]`` (a dimension or a count; ``1e5`` is accepted, ``2.5``
    not)."""
    try:
        whole = not isinstance(dim, bool) and float(dim) == int(dim)
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or not minimum <= dim <= maximum:
        upper = "" if maximum == math.inf else f" and <= {maximum:g}"
        raise InputError(key, dim, f"an integer >= {minimum}{upper}")
    return int(dim)


def check_rate(key: str, rate: Any) -> float:
    """A Poisson sampling rate in ``(0, 1]``."""
    q = number(rate)
    if not 0.0 < q <= 1.0:
        raise InputError(key, rate, "a sampling rate in (0, 1]")
    return q
