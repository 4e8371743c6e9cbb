"""The crossing search of :func:`fedpriv.verification.sandwich.one_sided_p_value`: started from
the last crossing of the same test and declaration (issue 37), it must find exactly the ``b``
and p-value a plain bisection over the whole range finds, wherever it starts."""

from __future__ import annotations

import math
from functools import cache

import pytest
from scipy import stats

from fedpriv.verification.records import RecordCount
from fedpriv.verification.sandwich import one_sided_p_value


@cache
def _exceed(trials: int, rate: float) -> list[float]:
    """``P(B > b)`` for every ``b``, from scipy directly."""
    return [float(stats.binom.sf(b, trials, rate)) for b in range(trials + 1)]


def _plain(tail, records: RecordCount) -> tuple[float, int]:
    """The p-value by the definition: ``2·min_b max(P(B > b), tail(b))`` over every ``b``,
    taken at the crossing (a scan, no bisection)."""
    exceed = _exceed(records.trials, records.rate)
    low = next((b for b in range(records.trials) if exceed[b] <= tail(b)), records.trials)
    best, at = tail(low), low
    if low > 0 and exceed[low - 1] < best:
        best, at = exceed[low - 1], low - 1
    return min(1.0, 2.0 * best), at


def _tail(x: float, trials: int):
    """A nondecreasing tail in ``b``, crossing ``P(B > b)`` at a place set by ``x``."""
    return lambda b: min(1.0, math.exp(-x * (1.0 - b / trials) * 20.0))


@pytest.mark.parametrize("trials,rate", [(72, 0.22), (6, 0.5), (500, 0.03)])
def test_a_started_search_finds_the_plain_crossing(trials: int, rate: float) -> None:
    records = RecordCount(trials, rate, "test")
    key = ("test", trials, rate)
    found = []
    for x in [0.05, 3.0, 0.4, 0.41, 0.39, 1.0, 10.0, 0.0, 0.7, 0.69]:  # jumps and near repeats
        tail = _tail(x, trials)
        got = one_sided_p_value(tail, records, start=key)
        assert got == _plain(tail, records)
        assert got == one_sided_p_value(tail, records)  # no start: the plain bisection
        found.append(got[1])
    assert len(set(found)) > 3  # the crossings moved: the starts were tested far and near


def test_every_start_finds_every_crossing() -> None:
    """From a crossing at each ``h`` to one at each ``c`` (a step tail crosses exactly at its
    step): the found ``b`` and p-value are the plain scan's, whatever ``h − c``."""
    records = RecordCount(40, 0.3, "test")

    def step(c: int):
        return lambda b: 0.9 if b >= c else 1e-300

    for h in range(records.trials + 1):
        for c in range(records.trials + 1):
            one_sided_p_value(step(h), records, start="every")
            assert one_sided_p_value(step(c), records, start="every") == _plain(step(c), records)
