"""A client's ε budget: may it make one more round of releases?

A client with a budget ``B`` (``mechanism.epsilon_budget``) trains a round only if its
cumulative ε at δ *after* that round — every release it made so far plus the round's ``steps``
Poisson-sampled releases at its own rate ``q``, accounted by :func:`fedpriv.accounting.epsilon`
with the run's accountant (privacy-math.md §3) — is at most ``B``; otherwise it declines. The
question is asked before the round, so a client never exceeds its budget: the number of rounds
it trains is the largest ``k`` with ``ε(k·steps releases) ≤ B``, the count that
``fedpriv account --steps`` gives at the same ``q``, δ and accountant (and that
``--target-epsilon B --steps k·steps`` calibrates the noise for).

Flower-free and stateless: the ClientApp keeps the count of its releases between rounds
(``clients/budget.py``) and asks :func:`check_budget`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedpriv.accounting import Release, ReleaseEvent, epsilon
from fedpriv.validate import check_dim, check_positive

__all__ = [
    "RELEASES_KEY", "BudgetCheck", "check_budget", "decode_releases", "encode_releases",
]

RELEASES_KEY = "fedpriv-releases"
"""Train-config key (server → client) of the releases the auditor accounted per client, sent
when clients have ε budgets (:func:`encode_releases`)."""


@dataclass(frozen=True)
class BudgetCheck:
    """The answer for one round: ε after it, against the budget.

    Attributes
    ----------
    budget
        ``B``, ε at ``delta`` the client may spend.
    epsilon_next
        Cumulative ε at ``delta`` after ``released + steps`` releases.
    released, steps
        Releases made so far; releases the round would make.
    delta, accountant
        As the run accounts (``audit.delta``, ``audit.accountant``).
    """

    budget: float
    epsilon_next: float
    released: int
    steps: int
    delta: float
    accountant: str

    @property
    def within(self) -> bool:
        """Whether the round keeps the client within its budget (``ε ≤ B``)."""
        return self.epsilon_next <= self.budget

    def reason(self) -> str:
        """One line for the reply and the report: why the client declines."""
        return (f"epsilon budget exhausted: {self.released} releases so far and {self.steps} "
                f"more this round would give epsilon {self.epsilon_next:.6g} > budget "
                f"{self.budget:g} at delta {self.delta:g} ({self.accountant} accountant)")


def check_budget(
    budget: float, release: Release, *, sample_rate: float, released: int, steps: int,
    delta: float, accountant: str = "rdp", population: int | None = None,
    neighbouring: str = "add-remove",
) -> BudgetCheck:
    """ε at ``delta`` after ``released`` past and ``steps`` new releases of ``release``, each
    sampled at ``sample_rate`` (Poisson, or fixed-size from ``population``), against
    ``budget``.

    A release without a formal guarantee has ε = ∞: such a client declines every round.

    Parameters
    ----------
    budget
        ``B > 0``.
    release
        One release of the client's mechanism (``Mechanism.release(dim)``).
    sample_rate
        The client's own ``q = min(L, n)/n``.
    released
        Releases made in earlier rounds (``≥ 0``).
    steps
        Local steps of the coming round (``≥ 1``).
    delta, accountant, population, neighbouring
        As the auditing server's ledger uses them (:class:`~fedpriv.accounting.ReleaseEvent`,
        :func:`~fedpriv.accounting.epsilon`).
    """
    b = check_positive("epsilon_budget", budget)
    total = check_dim("releases", released, minimum=0) + check_dim("steps", steps)
    eps = epsilon([ReleaseEvent(release, sample_rate, total, population)], delta,
                  accountant=accountant, neighbouring=neighbouring).epsilon
    return BudgetCheck(b, eps, int(released), int(steps), delta, accountant)


def encode_releases(releases: Mapping[int, int]) -> str:
    """The train-config value of :data:`RELEASES_KEY`: ``{client id: releases}`` as JSON."""
    return json.dumps({str(cid): int(n) for cid, n in releases.items()}, sort_keys=True)


def decode_releases(text: Any, client_id: int) -> int:
    """The releases the server accounted for ``client_id`` (0 when it names none).

    Raises
    ------
    ValueError
        ``text`` is not such a JSON object of counts ``>= 0``.
    """
    value = json.loads(text) if isinstance(text, str) else None
    count = value.get(str(client_id), 0) if isinstance(value, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"{RELEASES_KEY} = {text!r:.80}: expected a JSON object of counts >= 0")
    return count
