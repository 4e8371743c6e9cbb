"""Whether an accountant can account a ledger: the question the server asks of every declaration
before it folds it (docs/trust.md §1, kind ``unaccountable``).

A client's reply declares its releases (mechanism, parameter, sampling rate, count); each
parameter is checked for its own range when the mechanism is built, but whether the run's
accountant can account the client's *whole ledger* with them depends on the accountant and on
the combination: dp-accounting's RDP divides by σ² (ZeroDivisionError below σ ≈ 1e-162), its
Gaussian PLD overflows below σ = 1e-4 (client level: the accounted σ/2), its Laplace PLD below
λ = 1/700, and a PLD whose composed grid would not fit the memory budget is refused naming
``steps`` (:mod:`fedpriv.accounting.pld_grid`). Outside the server those are the user's
configuration errors (``InputError``, checked before a run starts); inside it they are one
client's claim that cannot be accounted, never the run's end.

:func:`unaccountable` answers by asking the accountant itself — the same call, on the same
ledger, that the tally then makes (:func:`~fedpriv.accounting.epsilon` keeps its result per
ledger, so the tally costs nothing more) — rather than by a copy of each route's limits, which
would drift from the routes. Every range check of the routes runs before anything large is
allocated, so a refused ledger is refused cheaply.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fedpriv.accounting.accountant import epsilon
from fedpriv.accounting.events import ReleaseEvent
from fedpriv.errors import InputError

__all__ = ["unaccountable"]


def _described(events: Sequence[ReleaseEvent]) -> str:
    """The ledger in a few words: its last event (the one being asked about)."""
    last = events[-1]
    parameter = last.release.parameter_name
    shown = "" if parameter is None else f" ({parameter} = {last.release.parameter:g})"
    return (f"{last.count:,} {last.release.mechanism} release(s){shown} at q = "
            f"{last.sample_rate:.4g}" + (f" after {len(events) - 1} earlier event(s)"
                                         if len(events) > 1 else ""))


def unaccountable(
    events: Sequence[ReleaseEvent], delta: float, *, accountant: str = "rdp",
    neighbouring: str = "add-remove",
) -> str | None:
    """Why ``accountant`` cannot account ``events`` at ``delta``, in one line; None when it can.

    It can when :func:`~fedpriv.accounting.epsilon` returns ε in ``[0, ∞]`` (∞: releases
    without a formal guarantee, which are accountable: they bound nothing). It cannot when the
    accounting raises — a route's range check (``InputError`` naming the argument), or
    dp-accounting's arithmetic outside its range (ZeroDivisionError, OverflowError,
    IndexError, ...) — or returns NaN or a negative ε.

    Parameters
    ----------
    events
        The ledger to account: a client's earlier releases and the ones it now declares last.
    delta
        The run's δ.
    accountant
        ``"tightest"``, ``"rdp"`` or ``"pld"`` (the run's ``audit.accountant``).
    neighbouring
        The relation it accounts under (``audit.neighbouring``).

    Examples
    --------
    >>> from fedpriv.mechanisms.gaussian import GaussianRelease
    >>> unaccountable([ReleaseEvent(GaussianRelease(1.0), 0.01, 100)], 1e-5) is None
    True
    >>> print(unaccountable([ReleaseEvent(GaussianRelease(1e-300), 0.01, 1)], 1e-5))
    ... # doctest: +ELLIPSIS
    the rdp accountant cannot account 1 gaussian release(s) (noise_multiplier = 1e-300) ...
    """
    events = list(events)
    if not events:
        return None
    head = f"the {accountant} accountant cannot account {_described(events)}"
    try:
        eps = epsilon(events, delta, accountant=accountant, neighbouring=neighbouring).epsilon
    except InputError as exc:
        return f"{head}: {exc.key} = {exc.value!r}: expected {exc.allowed}"
    except Exception as exc:  # noqa: BLE001 - dp-accounting fails outside its range with
        # whatever its arithmetic raises; each of those is the declaration's failure
        return f"{head}: {type(exc).__name__}: {exc}"
    if math.isnan(eps) or eps < 0.0:
        return f"{head}: it gives epsilon = {eps!r}"
    return None
