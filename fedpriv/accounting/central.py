"""ε against a third party that sees only the aggregate, with clients sampled as the server
sampled them (privacy-math.md §11, §14; docs/client-level.md, docs/flower-dp.md).

A server samples ``m`` of its ``N`` clients each round without replacement (Flower's
strategies do: a fixed number, not a Poisson draw). :func:`central_events` turns the rounds'
samples into the ledger of :class:`~fedpriv.accounting.events.ReleaseEvent` the routes compose:
a round with every client sampled (``m = N``) is the release itself on the aggregate of all of
them (rate 1, no population); a round with ``m < N`` is a fixed-size sample of ``m`` of ``N``,
which :mod:`fedpriv.accounting.sampling` accounts under the run's relation (add/remove: the
doubled release at ``m/(N+1)``; replace-one: the mixture pair at ``m/N``). The client-level
ledger's ``epsilon_central`` (:mod:`fedpriv.ledger`) and the run-level ``central`` block of an
app behind Flower's DP strategy wrappers (:mod:`fedpriv.audit.report_central`) both read it.
"""

from __future__ import annotations

from collections.abc import Iterable

from fedpriv.accounting.accountant import AccountingResult, epsilon
from fedpriv.accounting.events import Release, ReleaseEvent

__all__ = ["central_epsilon", "central_events", "central_sampling"]


def central_sampling(sampled: int, population: int) -> str:
    """How the clients of a round were sampled, in words (a report's ``central_sampling``)."""
    return f"fixed-size: {sampled} of {population} clients without replacement"


def central_events(
    samples: Iterable[tuple[Release, int, int]],
) -> list[ReleaseEvent]:
    """The ledger of rounds given as ``(release, m sampled, of N)``: rounds with the same
    triple are one event of that many releases (module docstring), in a stable order."""
    counts: dict[tuple[Release, int, int], int] = {}
    for release, m, n in samples:
        key = (release, min(m, n), n)
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (repr(item[0][0]), item[0][1:]))
    # every client sampled: the aggregate of all of them, not a fixed-size sample
    return [ReleaseEvent(release, m / n, rounds, n if m < n else None)
            for (release, m, n), rounds in ordered]


def central_epsilon(
    samples: Iterable[tuple[Release, int, int]], delta: float, *,
    accountant: str = "tightest", neighbouring: str = "add-remove",
) -> AccountingResult:
    """ε at ``delta`` of the rounds ``(release, m, N)`` (:func:`central_events`) under
    ``neighbouring``, by ``accountant`` (``"tightest"``: the least of PLD and RDP)."""
    return epsilon(central_events(samples), delta, accountant=accountant,
                   neighbouring=neighbouring)
