"""Cumulative ε of a ledger of releases: the pure :func:`epsilon` and the per-client ledger.

:func:`epsilon` accounts a sequence of :class:`ReleaseEvent` with the chosen accountant
(``rdp`` with route ``best`` / ``rdp`` / ``approach1``, or ``pld``) and returns an
:class:`AccountingResult` saying which route gave the number, at which order, and what to be
wary of. :class:`ClientAccountant` keeps one client's ledger for the auditing server: the
client's own sampling rate and release count per round, heterogeneous parameters composed
correctly (RDP curves add; PLDs compose).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from fedpriv.accounting.approach1 import Approach1
from fedpriv.accounting.events import NEIGHBOURING_RELATION, Release, ReleaseEvent
from fedpriv.accounting.routes import (
    approach1_route,
    grouped_counts,
    pld_discretization,
    pld_epsilon,
    rdp_route,
)
from fedpriv.errors import InputError

__all__ = ["ACCOUNTANTS", "ROUTES", "AccountingResult", "ClientAccountant", "epsilon"]

ACCOUNTANTS = ("rdp", "pld")
ROUTES = ("best", "rdp", "approach1")


@dataclass(frozen=True)
class AccountingResult:
    """ε at δ of a ledger, with its provenance.

    Attributes
    ----------
    epsilon, delta
        The guarantee (add/remove neighbours, one example; ``inf`` without a formal guarantee).
    accountant
        ``"rdp"`` or ``"pld"``.
    route
        The route that gave ``epsilon``: ``"rdp"``, ``"approach1"`` or ``"pld"``.
    optimal_order
        The Rényi order behind ``epsilon`` (``None`` for PLD).
    routes
        ε of every route computed (the reported one is their minimum).
    warnings
        Things the reader must know (optimum at a grid edge, skipped routes, no guarantee).
    approach1
        Details of the approach-1 route when it was computed.
    discretization
        PLD value discretisation (``None`` for RDP).
    """

    epsilon: float
    delta: float
    accountant: str
    route: str
    optimal_order: float | None
    routes: Mapping[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    approach1: Approach1 | None = None
    discretization: float | None = None
    neighbouring_relation: str = NEIGHBOURING_RELATION


def epsilon(
    events: Sequence[ReleaseEvent],
    delta: float,
    *,
    accountant: str = "rdp",
    route: str = "best",
    discretization: float | None = None,
) -> AccountingResult:
    """Cumulative ε at ``delta`` of ``events`` (module docstring).

    Parameters
    ----------
    events
        The ledger; an empty ledger has ε = 0.
    delta
        Target δ in (0, 1).
    accountant
        ``"rdp"`` or ``"pld"``.
    route
        For ``rdp``: ``"best"`` (least of the RDP conversion and approach 1, the latter only
        on a homogeneous ledger), ``"rdp"`` or ``"approach1"``. Ignored for ``pld``.
    discretization
        PLD value discretisation; default: the finest ``pld_discretization`` of the releases in
        the ledger (PLDs compose only on a common grid), coarsened pessimistically where the
        composed grid would not fit the memory budget (the Δ used is reported).
    """
    _check_choices(accountant, route, delta)
    return _epsilon(tuple(events), delta, accountant, route, discretization)


@lru_cache(maxsize=4096)
def _epsilon(
    events: tuple[ReleaseEvent, ...], delta: float, accountant: str, route: str,
    discretization: float | None,
) -> AccountingResult:
    """:func:`epsilon` of a checked ledger, kept per ledger: clients with the same release
    history (most of a federation) share one accounting per round, in the ledger, in each
    client's budget check and in ``--resume`` alike."""
    if not events:
        return AccountingResult(0.0, delta, accountant, "none", None)
    if not all(e.release.formal_guarantee for e in events):
        return _no_guarantee(events, delta, accountant)
    if accountant == "pld":
        step = discretization or pld_discretization(events)
        eps = pld_epsilon(events, delta, step)
        return AccountingResult(eps, delta, "pld", "pld", None, {"pld": eps}, (), None, step)
    return _rdp_accountant(events, delta, route)


def _check_choices(accountant: str, route: str, delta: float) -> None:
    if accountant not in ACCOUNTANTS:
        raise InputError("accountant", accountant, f"one of {', '.join(ACCOUNTANTS)}")
    if route not in ROUTES:
        raise InputError("route", route, f"one of {', '.join(ROUTES)}")
    if not 0.0 < delta < 1.0:
        raise InputError("delta", delta, "a number in (0, 1)")


def _no_guarantee(
    events: Sequence[ReleaseEvent], delta: float, accountant: str
) -> AccountingResult:
    names = sorted({e.release.mechanism for e in events if not e.release.formal_guarantee})
    note = (f"releases without a formal guarantee ({', '.join(names)}: no noise, σ = 0 or the "
            "VMF true norm released): ε is infinite")
    return AccountingResult(math.inf, delta, accountant, "none", None, {}, (note,))


def _rdp_accountant(events: Sequence[ReleaseEvent], delta: float, route: str) -> AccountingResult:
    found: dict[str, tuple[float, float | None, bool]] = {}
    warnings: list[str] = []
    detail = None
    if route in ("best", "rdp"):
        conv = rdp_route(events, delta)
        found["rdp"] = (conv.epsilon, conv.order, conv.at_edge)
    if route == "approach1" or (route == "best" and len(grouped_counts(events)) == 1):
        detail = approach1_route(events, delta)
        found["approach1"] = (detail.epsilon, detail.order, detail.at_edge)
    elif route == "best":
        warnings.append("approach 1 skipped: it needs identical releases (one mechanism, "
                        "parameter and sampling rate)")
    winner = min(found, key=lambda name: found[name][0])
    eps, order, at_edge = found[winner]
    if at_edge:
        warnings.append(_edge_warning(winner, order, detail))
    routes = {name: value[0] for name, value in found.items()}
    return AccountingResult(eps, delta, "rdp", winner, order, routes, tuple(warnings), detail)


def _edge_warning(route: str, order: float | None, detail: Approach1 | None) -> str:
    if route == "rdp":
        return (f"the optimal RDP order {order:g} sits at the edge of the order grid "
                "(1.1 ... 1024): the reported epsilon may be loose")
    return (f"the approach-1 optimum (order {order:g}, epsilon0 {detail.epsilon0:g}) sits at the "
            "edge of its search grid: the reported epsilon may be loose")


class ClientAccountant:
    """One client's privacy ledger: record releases per round, read cumulative ε at δ.

    Parameters
    ----------
    accountant, route, discretization
        As in :func:`epsilon`.

    Examples
    --------
    >>> from fedpriv.mechanisms import build_mechanism
    >>> acc = ClientAccountant()
    >>> release = build_mechanism("gaussian", {"noise_multiplier": 1.0}).release(dim=100)
    >>> _ = acc.record(release, sample_rate=0.01, steps=10)
    >>> acc.epsilon(1e-5) > 0
    True
    """

    def __init__(
        self, accountant: str = "rdp", route: str = "best", discretization: float | None = None
    ) -> None:
        _check_choices(accountant, route, 0.5)
        self.accountant, self.route, self.discretization = accountant, route, discretization
        self._events: list[ReleaseEvent] = []

    @property
    def events(self) -> tuple[ReleaseEvent, ...]:
        """The recorded ledger, oldest first."""
        return tuple(self._events)

    def copy(self) -> ClientAccountant:
        """An accountant with the same settings and a copy of this ledger."""
        twin = ClientAccountant(self.accountant, self.route, self.discretization)
        twin._events = list(self._events)
        return twin

    def record(self, release: Release, sample_rate: float, steps: int) -> ReleaseEvent:
        """Record ``steps`` Poisson-sampled releases at rate ``sample_rate``."""
        event = ReleaseEvent(release, sample_rate, steps)
        self._events.append(event)
        return event

    def result(self, delta: float) -> AccountingResult:
        """Cumulative :class:`AccountingResult` at ``delta``."""
        return epsilon(self._events, delta, accountant=self.accountant, route=self.route,
                       discretization=self.discretization)

    def epsilon(self, delta: float) -> float:
        """Cumulative ε at ``delta`` (``inf`` once any release had no formal guarantee)."""
        return self.result(delta).epsilon
