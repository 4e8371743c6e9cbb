"""Argument checks shared by the numeric modules (accounting, leakage); each raises
:class:`~fedpriv.errors.InputError` naming the argument, the value and what is allowed."""

from __future__ import annotations

import math
from typing import Any

from fedpriv.errors import InputError

__all__ = [
    "check_dim",
    "check_finite",
    "check_nonnegative",
    "check_positive",
    "check_probability",
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


def check_nonnegative(key: str, value: Any, *, allow_inf: bool = False) -> float:
    """A finite number ``>= 0`` (or ``+inf`` too, with ``allow_inf``)."""
    v = number(value)
    if not (v >= 0.0 and (allow_inf or math.isfinite(v))):
        raise InputError(key, value, "a number >= 0 (inf allowed)" if allow_inf
                         else "a finite number >= 0")  # fmt: skip
    return v


def check_finite(key: str, value: Any) -> float:
    """Any finite number."""
    v = number(value)
    if not math.isfinite(v):
        raise InputError(key, value, "a finite number")
    return v


def check_probability(key: str, value: Any, *, closed: bool = False) -> float:
    """A probability in ``(0, 1)``, or in ``[0, 1]`` with ``closed``."""
    v = number(value)
    inside = 0.0 <= v <= 1.0 if closed else 0.0 < v < 1.0
    if not inside:
        raise InputError(key, value, "a number in [0, 1]" if closed else "a number in (0, 1)")
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
