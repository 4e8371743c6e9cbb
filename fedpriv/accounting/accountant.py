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
from dataclasses import dataclass, field, replace
from functools import lru_cache

from fedpriv.accounting.approach1 import Approach1
from fedpriv.accounting.events import Release, ReleaseEvent
from fedpriv.accounting.routes import (
    approach1_route,
    grouped_counts,
    pld_discretization,
    pld_epsilon,
    rdp_route,
)
from fedpriv.accounting.sampling import accounted_events, check_neighbouring
from fedpriv.errors import InputError

__all__ = ["ACCOUNTANTS", "ROUTES", "AccountingResult", "ClientAccountant", "epsilon"]

ACCOUNTANTS = ("tightest", "rdp", "pld")
ROUTES = ("best", "rdp", "approach1")


@dataclass(frozen=True)
class AccountingResult:
    """ε at δ of a ledger, with its provenance.

    Attributes
    ----------
    epsilon, delta
        The guarantee (one example under ``neighbouring``; ``inf`` without a formal guarantee).
    accountant
        ``"tightest"``, ``"rdp"`` or ``"pld"``.
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
    neighbouring
        ``"add-remove"`` or ``"replace-one"``.
    sampling
        How the ledger's releases were sampled: ``"poisson"``, ``"fixed-size"``, ``"none"``,
        or several of them joined by ``+``.
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
    neighbouring: str = "add-remove"
    sampling: str = "poisson"


def epsilon(
    events: Sequence[ReleaseEvent],
    delta: float,
    *,
    accountant: str = "rdp",
    route: str = "best",
    discretization: float | None = None,
    neighbouring: str = "add-remove",
) -> AccountingResult:
    """Cumulative ε at ``delta`` of ``events`` (module docstring).

    Parameters
    ----------
    events
        The ledger; an empty ledger has ε = 0.
    delta
        Target δ in (0, 1).
    accountant
        ``"tightest"`` (the least of ``pld`` and ``rdp``; a route that cannot take the ledger
        is skipped with a warning), ``"rdp"`` or ``"pld"``.
    route
        For ``rdp``: ``"best"`` (least of the RDP conversion and approach 1, the latter only
        on a homogeneous ledger), ``"rdp"`` or ``"approach1"``. Ignored for ``pld``.
    discretization
        PLD value discretisation; default: the finest ``pld_discretization`` of the releases in
        the ledger (PLDs compose only on a common grid), coarsened pessimistically where the
        composed grid would not fit the memory budget (the Δ used is reported).
    neighbouring
        ``"add-remove"`` or ``"replace-one"`` (:mod:`.sampling`).
    """
    _check_choices(accountant, route, delta)
    check_neighbouring(neighbouring)
    return _epsilon(tuple(events), delta, accountant, route, discretization, neighbouring)


@lru_cache(maxsize=4096)
def _epsilon(
    events: tuple[ReleaseEvent, ...], delta: float, accountant: str, route: str,
    discretization: float | None, neighbouring: str,
) -> AccountingResult:
    """:func:`epsilon` of a checked ledger, kept per ledger: clients with the same release
    history (most of a federation) share one accounting per round, in the ledger, in each
    client's budget check and in ``--resume`` alike."""
    sampling = "+".join(dict.fromkeys(e.sampling for e in events)) or "none"
    named = {"neighbouring": neighbouring, "sampling": sampling}
    if not events:
        return AccountingResult(0.0, delta, accountant, "none", None, **named)
    if not all(e.release.formal_guarantee for e in events):
        return replace(_no_guarantee(events, delta, accountant), **named)
    accounted = accounted_events(events, neighbouring)
    if accountant == "pld":
        result = _pld_accountant(accounted, delta, discretization)
    elif accountant == "rdp":
        result = _rdp_accountant(accounted, delta, route)
    else:
        result = _tightest(accounted, delta, route, discretization)
    return replace(result, **named)


def _pld_accountant(
    events: Sequence[ReleaseEvent], delta: float, discretization: float | None
) -> AccountingResult:
    step = discretization or pld_discretization(events)
    eps = pld_epsilon(events, delta, step)
    return AccountingResult(eps, delta, "pld", "pld", None, {"pld": eps}, (), None, step)


def _tightest(
    events: Sequence[ReleaseEvent], delta: float, route: str, discretization: float | None
) -> AccountingResult:
    """The least of the PLD and RDP routes (each an upper bound); a route that cannot take the
    ledger (outside its numeric range or its grid budget) is skipped with a warning, and the
    error of the last is raised when none can."""
    found: list[AccountingResult] = []
    skipped: list[str] = []
    error: Exception | None = None
    for name, run in (("pld", lambda: _pld_accountant(events, delta, discretization)),
                      ("rdp", lambda: _rdp_accountant(events, delta, route))):
        try:
            found.append(run())
        except (InputError, ArithmeticError, ValueError) as exc:
            error = exc
            skipped.append(f"the {name} route was skipped: {exc}")
    if not found:
        raise error  # type: ignore[misc]
    best = min(found, key=lambda r: r.epsilon)
    routes = {name: eps for r in found for name, eps in r.routes.items()}
    return replace(best, accountant="tightest", routes=routes,
                   warnings=(*best.warnings, *skipped))


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
        self, accountant: str = "rdp", route: str = "best", discretization: float | None = None,
        neighbouring: str = "add-remove",
    ) -> None:
        _check_choices(accountant, route, 0.5)
        self.accountant, self.route, self.discretization = accountant, route, discretization
        self.neighbouring = check_neighbouring(neighbouring)
        self._events: list[ReleaseEvent] = []

    @property
    def events(self) -> tuple[ReleaseEvent, ...]:
        """The recorded ledger, oldest first."""
        return tuple(self._events)

    def copy(self) -> ClientAccountant:
        """An accountant with the same settings and a copy of this ledger."""
        twin = ClientAccountant(self.accountant, self.route, self.discretization,
                                self.neighbouring)
        twin._events = list(self._events)
        return twin

    def record(self, release: Release, sample_rate: float, steps: int,
               population: int | None = None) -> ReleaseEvent:
        """Record ``steps`` releases sampled at rate ``sample_rate``: Poisson, or a fixed-size
        sample of the ``population`` (:class:`ReleaseEvent`)."""
        event = ReleaseEvent(release, sample_rate, steps, population)
        self._events.append(event)
        return event

    def result(self, delta: float) -> AccountingResult:
        """Cumulative :class:`AccountingResult` at ``delta``."""
        return epsilon(self._events, delta, accountant=self.accountant, route=self.route,
                       discretization=self.discretization, neighbouring=self.neighbouring)

    def epsilon(self, delta: float) -> float:
        """Cumulative ε at ``delta`` (``inf`` once any release had no formal guarantee)."""
        return self.result(delta).epsilon
