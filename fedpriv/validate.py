"""The one set of argument checks: every module that validates an input calls these.

Each checker takes the key the value came from (a config key, a command-line flag, a
mechanism parameter) and the value, returns the value normalised, and raises
:class:`~fedpriv.errors.InputError` naming the key, the value and what is allowed. Numbers
must be real numbers (Python or NumPy): booleans and strings are refused — a layer that reads
text (argparse, ``--set``, Flower node config) converts it first.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedpriv.errors import InputError

__all__ = [
    "Check",
    "check_choice",
    "check_dim",
    "check_finite",
    "check_in_range",
    "check_flag",
    "check_match",
    "check_int_range",
    "check_nonnegative",
    "check_out_dir",
    "check_positive",
    "check_positive_list",
    "check_probability",
    "check_rate",
    "check_scores",
    "number",
]

Check = Callable[[str, Any], Any]
"""A checker: ``(key, value) -> normalised value``, raising InputError."""


def number(value: Any) -> float:
    """``value`` as a float, or NaN when it is not a real number (so range checks refuse it)."""
    if type(value) is float:  # the common case, without the ABC check (~0.5 µs; the server
        return value  # checks ~60 values per reply)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def check_positive(key: str, value: Any, *, maximum: float = math.inf) -> float:
    """A finite number ``> 0`` (and ``<= maximum``)."""
    v = number(value)
    if not (math.isfinite(v) and 0.0 < v <= maximum):
        upper = "" if maximum == math.inf else f" and <= {maximum:g}"
        raise InputError(key, value, f"a finite number > 0{upper}")
    return v


def check_nonnegative(
    key: str, value: Any, *, allow_inf: bool = False, maximum: float = math.inf
) -> float:
    """A finite number ``>= 0`` (or ``+inf`` too, with ``allow_inf``; ``<= maximum``)."""
    v = number(value)
    if not (0.0 <= v <= maximum and (allow_inf or math.isfinite(v))):
        upper = "" if maximum == math.inf else f" and <= {maximum:g}"
        raise InputError(key, value, "a number >= 0 (inf allowed)" if allow_inf
                         else f"a finite number >= 0{upper}")  # fmt: skip
    return v


def check_finite(key: str, value: Any) -> float:
    """Any finite number."""
    v = number(value)
    if not math.isfinite(v):
        raise InputError(key, value, "a finite number")
    return v


def check_dim(key: str, dim: Any, minimum: int = 1, maximum: float = math.inf) -> int:
    """An integer in ``[minimum, maximum]`` (a dimension or a count; ``1e5`` is accepted,
    ``2.5`` not)."""
    v = number(dim)
    if not (math.isfinite(v) and v == int(v) and minimum <= v <= maximum):
        upper = "" if maximum == math.inf else f" and <= {maximum:g}"
        raise InputError(key, dim, f"an integer >= {minimum}{upper}")
    return int(v)


def check_int_range(key: str, value: Any, low: int, high: int, *, what: str = "") -> int:
    """An integer in ``[low, high]`` — the bound that keeps a count from running away."""
    v = number(value)
    if not (math.isfinite(v) and v == int(v) and low <= v <= high):
        raise InputError(key, value, f"{what or 'an integer'} in [{low:,}, {high:,}]")
    return int(v)


def check_in_range(key: str, value: Any, low: float, high: float, why: str = "") -> float:
    """A finite number in ``[low, high]``; ``why`` says where the limits come from."""
    v = number(value)
    if not (math.isfinite(v) and low <= v <= high):
        reason = f" ({why})" if why else ""
        raise InputError(key, value, f"a number in [{low:g}, {high:g}]{reason}")
    return v


def check_rate(key: str, rate: Any) -> float:
    """A Poisson sampling rate in ``(0, 1]``."""
    q = number(rate)
    if not 0.0 < q <= 1.0:
        raise InputError(key, rate, "a sampling rate in (0, 1]")
    return q


def check_flag(key: str, value: Any) -> bool:
    """A boolean."""
    if not isinstance(value, bool):
        raise InputError(key, value, "true or false")
    return value


def check_positive_list(key: str, value: Any) -> tuple[float, ...]:
    """A non-empty list of finite numbers ``> 0``, or a comma-separated string of them (Flower's
    node config holds scalars only)."""
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
    values = tuple(number(item) for item in items)
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise InputError(key, value, allowed)
    return values


def check_probability(key: str, value: Any, *, closed: bool = False) -> float:
    """A probability in ``(0, 1)`` (a δ, a confidence, a significance level), or in ``[0, 1]``
    with ``closed``."""
    v = number(value)
    inside = 0.0 <= v <= 1.0 if closed else 0.0 < v < 1.0
    if not inside:
        raise InputError(key, value, "a number in [0, 1]" if closed else "a number in (0, 1)")
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


def check_match(key: str, value: Any, pattern: str, allowed: str) -> str:
    """A string matched in full by the regular expression ``pattern`` (``allowed`` says, in
    words, what it accepts)."""
    if not (isinstance(value, str) and re.fullmatch(pattern, value)):
        raise InputError(key, value, allowed)
    return value


def check_out_dir(key: str, path: Any) -> Path:
    """An output directory: an existing directory, or a path whose nearest existing ancestor is
    a directory this process can create entries in (checked before any work; the caller
    creates it).

    Writability is tried, not read from permission bits: an empty directory is made there
    (``tempfile.mkdtemp``, mode 0700) and removed at once. ``os.access`` answers yes for root
    in ``/proc`` and under ``/sys``, where creating fails, so only trying tells.
    """
    try:
        out = Path(path)
        if out.exists() and not out.is_dir():
            raise InputError(key, str(path), "a directory (this is an existing file)")
        ancestor = out if out.exists() else next(
            p for p in out.absolute().parents if p.exists())
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        if isinstance(exc, InputError):
            raise
        raise InputError(key, str(path), f"a usable directory path ({exc})") from None
    if not ancestor.is_dir():
        raise InputError(key, str(path), f"a path under a directory ({ancestor} is a file)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".fedpriv-probe-", dir=ancestor))
    except OSError as exc:
        raise InputError(key, str(path), f"a path under a writable directory ({ancestor}: "
                         f"{exc.strerror or exc})") from None
    return out
