"""Validation of mechanism parameters from a config mapping.

Every reader takes the parameter mapping, the parameter name, a default and the key prefix,
and raises :class:`fedpriv.errors.InputError` naming ``f"{prefix}.{name}"`` for a bad value.
Numbers must be real numbers (Python or NumPy; booleans and strings are rejected: a config or
``--set`` layer that reads text must convert it first); the one exception is
``clip_per_layer``, which also accepts a comma-separated string because Flower run config
holds scalars only.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from fedpriv.errors import InputError

__all__ = ["read_flag", "read_nonnegative", "read_positive", "read_positive_list"]


def _number(value: object, key: str, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(key, value, allowed)
    number = float(value)
    if not math.isfinite(number):
        raise InputError(key, value, allowed)
    return number


def read_positive(params: Mapping[str, Any], name: str, default: float, prefix: str) -> float:
    """Return ``params[name]`` (or ``default``) as a finite float ``> 0``."""
    key, allowed = f"{prefix}.{name}", "a finite number > 0"
    number = _number(params.get(name, default), key, allowed)
    if number <= 0:
        raise InputError(key, params.get(name, default), allowed)
    return number


def read_nonnegative(params: Mapping[str, Any], name: str, default: float, prefix: str) -> float:
    """Return ``params[name]`` (or ``default``) as a finite float ``≥ 0``."""
    key, allowed = f"{prefix}.{name}", "a finite number >= 0"
    number = _number(params.get(name, default), key, allowed)
    if number < 0:
        raise InputError(key, params.get(name, default), allowed)
    return number


def read_flag(params: Mapping[str, Any], name: str, default: bool, prefix: str) -> bool:
    """Return ``params[name]`` (or ``default``), which must be a boolean."""
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise InputError(f"{prefix}.{name}", value, "true or false")
    return value


def read_positive_list(
    params: Mapping[str, Any], name: str, prefix: str
) -> tuple[float, ...] | None:
    """Return ``params[name]`` as a non-empty tuple of finite floats ``> 0``, or ``None``.

    Accepts a list/tuple of numbers or a comma-separated string such as ``"0.5,0.5,1"``.
    """
    value = params.get(name)
    if value is None:
        return None
    key = f"{prefix}.{name}"
    allowed = "a non-empty list of finite numbers > 0 (or a comma-separated string of them)"
    items: Sequence[object]
    if isinstance(value, str):
        try:
            items = [float(part) for part in value.split(",")]
        except ValueError:
            raise InputError(key, value, allowed) from None
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise InputError(key, value, allowed)
    numbers = tuple(_number(item, key, allowed) for item in items)
    if not numbers or min(numbers) <= 0:
        raise InputError(key, value, allowed)
    return numbers
