"""ε of a client's release history at an observed noise scale: the history re-accounted with
every release's noise parameter set to a lower confidence bound of the noise the server saw
(``epsilon_observed``: :class:`fedpriv.ledger.PrivacyLedger`, privacy-math.md §8), on a 1 %
grid so clients share the accounting."""

from __future__ import annotations

import math
from functools import lru_cache

from fedpriv.accounting.accountant import epsilon
from fedpriv.accounting.events import ReleaseEvent
from fedpriv.errors import InputError

__all__ = ["MIN_ACCOUNTABLE", "epsilon_at_noise", "noise_grid"]

MIN_ACCOUNTABLE = 1e-4
"""Least noise scale (σ, λ) ``epsilon_observed`` is accounted at; below it ε is reported
infinite (:data:`fedpriv.mechanisms.base.MIN_NOISE`: one release there already has ε ≈ 5·10⁷)."""
_GRID = math.log(1.01)
_KEPT_GRID_POINTS = 4096
"""Most ``(history, grid point)`` answers kept."""


def noise_grid(noise: float) -> float:
    """``noise`` rounded down to the 1 % grid ``1.01^j`` (capped at 10⁶, the largest noise
    scale a mechanism takes): what ``epsilon_observed`` is accounted at."""
    if not math.isfinite(noise) or noise >= 1e6:
        return 1e6
    return min(noise, math.exp(math.floor(math.log(noise) / _GRID) * _GRID))


def epsilon_at_noise(events: tuple[ReleaseEvent, ...], noise: float, delta: float,
                     accountant: str = "rdp", route: str = "best",
                     neighbouring: str = "add-remove") -> float:
    """ε at ``delta`` of ``events`` with every release's noise parameter set to
    :func:`noise_grid` of ``noise`` (rounded down: less noise, more ε; clients share the
    accounting), by ``accountant``; RDP where that one cannot take it; ``inf`` below
    :data:`MIN_ACCOUNTABLE`, for releases without a formal guarantee, or where neither
    accountant can (never an exception)."""
    if not events:
        return 0.0
    if not (noise >= MIN_ACCOUNTABLE) or any(
            not e.release.formal_guarantee or e.release.parameter_name is None for e in events):
        return math.inf
    grid = noise_grid(noise)
    try:  # a round's clients share their history and mostly a few grid points: kept
        return _epsilon_at_grid(tuple(events), grid, delta, accountant, route, neighbouring)
    except TypeError:  # a release with unhashable parameters: computed every time
        return _epsilon_at_grid.__wrapped__(tuple(events), grid, delta, accountant, route,
                                            neighbouring)


@lru_cache(maxsize=_KEPT_GRID_POINTS)
def _epsilon_at_grid(events: tuple[ReleaseEvent, ...], grid: float, delta: float,
                     accountant: str, route: str, neighbouring: str) -> float:
    """:func:`epsilon_at_noise` at a grid point, kept per ``(history, grid point)``: the
    per-reply part is one lookup, not a ledger rebuilt at the grid point and accounted
    (the accounting itself was already kept, but rebuilding cost ~0.3 ms per reply)."""
    at = [ReleaseEvent(e.release.with_parameter(grid), e.sample_rate, e.count, e.population)
          for e in events]
    for name in dict.fromkeys((accountant, "rdp")):
        try:
            return epsilon(at, delta, accountant=name, route=route,
                           neighbouring=neighbouring).epsilon
        except (ArithmeticError, ValueError, InputError):
            continue
    return math.inf
