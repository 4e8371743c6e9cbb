"""``fedpriv.validate.number``: every real number as a float, anything else NaN (its fast
path for floats must not change an answer)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fedpriv.validate import check_positive, number


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.5, 1.5), (-0.0, -0.0), (math.inf, math.inf), (3, 3.0), (np.float64(2.5), 2.5),
     (np.float32(0.25), 0.25), (np.int64(7), 7.0), (Fraction(1, 4), 0.25)],
)
def test_real_numbers_are_floats(value, expected):
    out = number(value)
    assert type(out) is float and out == expected
    assert math.copysign(1.0, out) == math.copysign(1.0, expected)


@pytest.mark.parametrize("value", [True, False, "1.5", None, 1 + 2j, [1.0], 10**400])
def test_anything_else_is_nan(value):
    assert math.isnan(number(value))


def test_a_nan_float_is_refused_by_the_checks():
    assert math.isnan(number(math.nan))
    with pytest.raises(ValueError, match="noise"):
        check_positive("noise", math.nan)
