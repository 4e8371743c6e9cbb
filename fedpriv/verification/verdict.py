"""The outcome of one server-side check of a declared mechanism (privacy-math.md §9).

A :class:`Verdict` says whether a client's update is ``consistent`` with what it declared,
``inconsistent`` (with the statistic and its p-value), or ``unverifiable`` (with why). Several
checks of one client-round combine into one verdict with :func:`combine_verdicts`.

p-values are *valid*: under the declaration, ``P(p ≤ a) ≤ a`` for every ``a``. A check rejects
(``inconsistent``) when ``p ≤ α``; deterministic checks report ``p = 0`` (impossible under the
declaration) or ``p = 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, TypeAlias

__all__ = [
    "DEFAULT_ALPHA",
    "Checked",
    "Status",
    "Verdict",
    "attempted",
    "combine_verdicts",
    "decide",
    "unverifiable",
    "with_preconditions",
]

Status = Literal["consistent", "inconsistent", "unverifiable", "undeclared"]

# The false-alarm rate of each test (``audit.verify_alpha``): with 10⁴ client-rounds and a few
# tests each, the expected number of false "inconsistent" labels in a run is below 0.1.
DEFAULT_ALPHA = 1e-6


@dataclass(frozen=True, init=False)
class Verdict:
    """One check of one client-round.

    Attributes
    ----------
    test
        Which check (``"gaussian-norm"``, ``"declaration"``, …, or ``"client-round"``).
    status
        ``"consistent"``, ``"inconsistent"`` or ``"unverifiable"``; ``"undeclared"`` when the
        client declared nothing to check against (a reply without a report: a stock Flower
        client).
    reason
        One sentence a reader of the report understands without the code.
    p_value
        The smallest false-alarm rate at which the check rejects; ``None`` if nothing was tested.
    alpha
        The false-alarm rate the status was decided at; ``None`` for deterministic checks.
    statistic
        The numbers behind the decision (observed norm, noise scale, signal bound, tails…),
        read-only (a copy of the mapping given): one verdict is shared by many replies
        (a client's first fresh-noise verdict, a round's kept settings and size verdicts) and
        :func:`with_preconditions` hands a verdict's mapping on to the verdicts it builds.
    parts
        The verdicts a combined verdict was made from (empty for a single check).
    speaks_to
        The properties of the release the check speaks to
        (:data:`fedpriv.verification.properties.PROPERTIES`): one for most checks; two for a
        two-sided norm test, its low side (too little noise) first and its high side (too much
        signal) second; none for a check of the declaration itself (it can only refute the
        settings). :mod:`~fedpriv.verification.properties` reads the properties from here.
    refutes_only
        The check can refute its property but never verify it (declared batch sizes fitting
        ``q``; a canary's ε lower bound): a pass leaves the property untested. With no
        ``speaks_to`` it bears on no property at all (a canary bound that refuted nothing).
    """

    test: str
    status: Status
    reason: str
    p_value: float | None = None
    alpha: float | None = None
    statistic: Mapping[str, float] = field(default_factory=dict)
    parts: tuple[Verdict, ...] = ()
    speaks_to: tuple[str, ...] = ()
    refutes_only: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("Verdict sets its fields by hand (__init__): a subclass's own fields "
                        "would never be set")

    def __init__(self, test: str, status: Status, reason: str, p_value: float | None = None,
                 alpha: float | None = None, statistic: Mapping[str, float] | None = None,
                 parts: tuple[Verdict, ...] = (), speaks_to: tuple[str, ...] = (),
                 refutes_only: bool = False) -> None:
        """The fields, in their order, set at once (the frozen dataclass's own ``__init__`` sets
        them one at a time, twice as long: a reply's audit builds a dozen verdicts);
        ``statistic`` is kept read-only (:func:`_read_only`): verdicts are shared between
        replies."""
        object.__setattr__(self, "__dict__", {
            "test": test, "status": status, "reason": reason, "p_value": p_value,
            "alpha": alpha, "statistic": _read_only(statistic), "parts": parts,
            "speaks_to": speaks_to, "refutes_only": refutes_only})

    def to_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict (parts nested)."""
        return {
            "test": self.test,
            "status": self.status,
            "reason": self.reason,
            "p_value": self.p_value,
            "alpha": self.alpha,
            "statistic": dict(self.statistic),
            "parts": [part.to_dict() for part in self.parts],
        }


Checked: TypeAlias = "Verdict | Exception"
"""One update's verdict, or what checking it alone raised (a hostile update's): the caller
gives it the verdict it gets alone, and the updates checked with it keep theirs."""


def attempted(check: Callable[[], Verdict]) -> Checked:
    """``check()``, or the exception it raised (:data:`Checked`)."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - whatever a hostile update makes a check raise
        return exc


def decide(
    test: str,
    p_value: float,
    alpha: float,
    statistic: Mapping[str, float],
    *,
    passed: str,
    failed: str,
    speaks_to: tuple[str, ...] = (),
    refutes_only: bool = False,
) -> Verdict:
    """``inconsistent`` with reason ``failed`` when ``p_value ≤ alpha``, else ``consistent``
    (``speaks_to``, ``refutes_only``: as in :class:`Verdict`)."""
    bad = p_value <= alpha
    return Verdict(
        test=test,
        status="inconsistent" if bad else "consistent",
        reason=f"{failed if bad else passed} (p = {p_value:.3g}, alpha = {alpha:.3g})",
        p_value=float(p_value),
        alpha=alpha,
        statistic=statistic,
        speaks_to=speaks_to,
        refutes_only=refutes_only,
    )


def unverifiable(test: str, reason: str, statistic: Mapping[str, float] | None = None,
                 speaks_to: tuple[str, ...] = ()) -> Verdict:
    """A check that could not be made, and why (``speaks_to``: as in :class:`Verdict`)."""
    return Verdict(test, "unverifiable", reason, statistic=statistic or {}, speaks_to=speaks_to)


def combine_verdicts(
    verdicts: Sequence[Verdict],
    test: str = "client-round",
    *,
    preconditions: Sequence[Verdict] = (),
) -> Verdict:
    """One verdict for several checks of the same client-round.

    ``inconsistent`` if any check or precondition is; else ``consistent`` if any check is;
    else ``unverifiable``. A precondition (the declaration is possible, the batch sizes fit
    q) can refute a round but cannot verify it. The combined p-value is Bonferroni's
    ``min(1, m·min_i p_i)``, ``m`` the number of statistical parts (those with an ``alpha``;
    deterministic parts never reject falsely and are not counted) — valid under any
    dependence between the parts — so that combined verdicts of many client-rounds can enter
    :mod:`fedpriv.verification.multiple`. Each part decides at its own ``α``, so the
    false-alarm rate of the combined status is at most ``Σ_i α_i``.
    """
    everything = [*preconditions, *verdicts]
    if not everything:
        raise ValueError("combine_verdicts: nothing to combine")
    statuses = [v.status for v in everything]  # (lists, not generators: per reply, twice)
    if "inconsistent" in statuses:
        status: Status = "inconsistent"
    elif "consistent" in statuses[len(preconditions):]:
        status = "consistent"
    else:
        status = "unverifiable"
    chosen = [v for v in everything if v.status == status]
    p_values = [v.p_value for v in everything if v.p_value is not None]
    alphas = [v.alpha for v in everything if v.alpha is not None]
    p = min(1.0, max(1, len(alphas)) * min(p_values)) if p_values else None
    return Verdict(
        test=test,
        status=status,
        reason="; ".join([f"{v.test}: {v.reason}" for v in chosen]),
        p_value=p,
        alpha=sum(alphas) if alphas else None,
        statistic=_flattened(everything),
        parts=tuple(everything),
    )


@lru_cache(maxsize=4096)
def _prefixed(test: str, keys: tuple[str, ...]) -> tuple[str, ...]:
    """``test.key`` of each key: one tuple per test and statistic layout (the replies of a
    round share a few), not an f-string per number per reply."""
    return tuple(f"{test}.{k}" for k in keys)


class Statistic(dict):  # type: ignore[type-arg]
    """A verdict's numbers, read-only: verdicts are shared between replies, so nothing may
    change them after the verdict is made. A ``dict`` in every other respect — JSON, pickle,
    ``copy.deepcopy`` and ``dataclasses.asdict`` take it as one."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a verdict's statistic is read-only")

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type, tuple[dict]]:
        return type(self), (dict(self),)


def _read_only(statistic: Mapping[str, float] | None) -> Statistic:
    """A verdict's own read-only copy of ``statistic`` (one it already made is kept as is;
    any other mapping is copied, so its owner cannot change the verdict's numbers)."""
    if type(statistic) is Statistic:
        return statistic
    return Statistic({} if statistic is None else statistic)


def _flattened(verdicts: Sequence[Verdict]) -> dict[str, float]:
    """The verdicts' statistics in one mapping, each key prefixed with its test's name (the
    later of two equal keys wins, in the earlier's place: as a dict display)."""
    out: dict[str, float] = {}
    for v in verdicts:
        if v.statistic:
            out.update(zip(_prefixed(v.test, tuple(v.statistic)), v.statistic.values(),
                           strict=True))
    return out


def with_preconditions(verdict: Verdict, checks: Sequence[Verdict]) -> Verdict:
    """``verdict`` (a client-round's) with ``checks`` as further preconditions, its parts
    kept flat (``checks`` first): ``inconsistent`` when any check is — a precondition can
    refute a round, never verify it (:func:`fedpriv.verification.combine_verdicts`) — else
    the verdict's own status and reason. Deterministic checks (no ``alpha``) add nothing to the
    false-alarm rate; a statistical one (the fresh-noise test) adds its ``alpha``, and the
    p-value becomes Bonferroni's over every statistical part, as in ``combine_verdicts``."""
    failed = [c for c in checks if c.status == "inconsistent"]
    parts = (*checks, *(verdict.parts or (verdict,)))
    extra = _flattened(checks)
    # statistic is read-only: without numbers of its own a check leaves the verdict's mapping
    statistic = {**verdict.statistic, **extra} if extra else verdict.statistic
    tested = [c for c in checks if c.alpha is not None]
    alpha, p_value = verdict.alpha, verdict.p_value
    if tested:
        alphas = [q.alpha for q in parts if q.alpha is not None]
        p_values = [q.p_value for q in parts if q.p_value is not None]
        alpha = sum(alphas)
        p_value = min(1.0, len(alphas) * min(p_values))
    status, reason = verdict.status, verdict.reason
    if failed:
        own = [verdict] if verdict.status == "inconsistent" else []
        status, reason = "inconsistent", "; ".join(f"{c.test}: {c.reason}"
                                                   for c in [*failed, *own])
        p_value = 0.0 if any(c.alpha is None for c in failed) else p_value
    # built directly, not by dataclasses.replace (twice as long: a reply gets several)
    return Verdict(test=verdict.test, status=status, reason=reason, p_value=p_value, alpha=alpha,
                   statistic=statistic, parts=parts, speaks_to=verdict.speaks_to,
                   refutes_only=verdict.refutes_only)
