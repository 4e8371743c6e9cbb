"""The accounting routes over a ledger of :class:`~fedpriv.accounting.events.ReleaseEvent`.

* ``rdp``: each release's Poisson-subsampled RDP curve (:meth:`Release.subsampled_rdp`),
  summed over the ledger (composition adds RDP), converted by ``conversion.py``.
* ``approach1``: ``approach1.py`` on a homogeneous ledger (one release and sampling rate).
* ``pld``: each release's PLD (:meth:`Release.pld`), self-composed per count and composed
  across the ledger with dp-accounting.

Nothing here knows a mechanism by name: everything mechanism-specific is a method of the
release. Per-step curves and PLDs are cached by ``(release, sample_rate)`` (and the PLD's
grid), self-composed PLDs by ``(release, sample_rate, count)``, so that many clients with the
same settings cost one computation per round, and a client's per-step PLD is built once per
run, not once per round. Events are grouped by their step before composing (composition is
commutative), so a ledger of 40 rounds costs as much as one event with the summed count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from fedpriv.accounting.approach1 import Approach1, approach1
from fedpriv.accounting.conversion import DEFAULT_ORDERS, Conversion, rdp_to_epsilon
from fedpriv.accounting.events import Release, ReleaseEvent
from fedpriv.errors import InputError

__all__ = [
    "approach1_route",
    "composed_rdp",
    "grouped_counts",
    "pld_discretization",
    "pld_epsilon",
    "rdp_route",
]


def grouped_counts(events: Iterable[ReleaseEvent]) -> Counter:
    """Total count per step ``(release, sample_rate)``, in first-seen order."""
    counts: Counter = Counter()
    for event in events:
        counts[event.step] += int(event.count)
    return counts


@lru_cache(maxsize=1024)
def _per_step_rdp(release: Release, sample_rate: float, orders: tuple[float, ...]) -> np.ndarray:
    return release.subsampled_rdp(orders, sample_rate)


def composed_rdp(
    events: Sequence[ReleaseEvent], orders: tuple[float, ...] = DEFAULT_ORDERS
) -> np.ndarray:
    """RDP curve of the whole ledger: the sum of ``count ×`` per-step subsampled curves."""
    total = np.zeros(len(orders))
    for (release, rate), count in grouped_counts(events).items():
        total = total + count * _per_step_rdp(release, rate, orders)
    return total


def rdp_route(
    events: Sequence[ReleaseEvent], delta: float, orders: tuple[float, ...] = DEFAULT_ORDERS
) -> Conversion:
    """ε at ``delta`` of the ledger by RDP composition and conversion."""
    return rdp_to_epsilon(orders, composed_rdp(events, orders), delta)


def approach1_route(events: Sequence[ReleaseEvent], delta: float) -> Approach1:
    """ε at ``delta`` of a homogeneous ledger by approach 1 (``approach1.py``)."""
    counts = grouped_counts(events)
    if len(counts) != 1:
        raise InputError("route", "approach1", "rdp or best when the releases differ in "
                         "mechanism, parameter or sampling rate")
    ((release, rate), count), = counts.items()
    return _approach1(release, rate, count, delta)


@lru_cache(maxsize=1024)
def _approach1(release: Release, rate: float, count: int, delta: float) -> Approach1:
    return approach1(release.rdp, rate, count, delta)


def pld_discretization(events: Sequence[ReleaseEvent]) -> float:
    """The ledger's PLD value discretisation: the finest default of its releases, coarsened
    (pessimistically) only as far as the composed grid needs to fit the memory budget
    (:func:`fedpriv.accounting.pld_grid.choose_discretization`)."""
    from fedpriv.accounting.pld_grid import choose_discretization

    counts = grouped_counts(events)
    default = min(release.pld_discretization for release, _ in counts)
    needs = [_need(release, rate, count) for (release, rate), count in counts.items()]
    return choose_discretization(needs, default)


@lru_cache(maxsize=1024)
def _unit_need(release: Release, sample_rate: float) -> Any:
    """One release's grid need, kept: its loss laws (and their moment generating functions)
    do not depend on the count, which changes every round."""
    return release.grid_need(sample_rate, 1)


def _need(release: Release, sample_rate: float, count: int) -> Any:
    """:meth:`Release.grid_need` for ``count`` releases, from the kept laws (a release whose
    need counts several compositions per release, as the per-layer VMF's blocks, keeps them)."""
    unit = _unit_need(release, sample_rate)
    return replace(unit, steps=unit.steps * count)


@lru_cache(maxsize=256)
def _per_step_pld(release: Release, sample_rate: float, discretization: float) -> Any:
    """One release's PLD on the ledger's grid, kept across rounds: its grid was chosen for the
    whole ledger (:func:`pld_discretization`), so the count no longer sizes it."""
    return release.pld(sample_rate, discretization, steps=1)


@lru_cache(maxsize=32)
def _self_composed_pld(release: Release, rate: float, count: int, discretization: float) -> Any:
    return _per_step_pld(release, rate, discretization).self_compose(count)


def pld_epsilon(events: Sequence[ReleaseEvent], delta: float, discretization: float) -> float:
    """ε at ``delta`` of the ledger by PLD composition (pessimistic)."""
    composed = None
    for (release, rate), count in grouped_counts(events).items():
        part = _self_composed_pld(release, rate, count, discretization)
        composed = part if composed is None else composed.compose(part)
    return float(composed.get_epsilon_for_delta(delta))
