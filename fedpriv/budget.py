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

from dataclasses import dataclass

from fedpriv.accounting import Release, ReleaseEvent, epsilon
from fedpriv.validate import check_dim, check_positive

__all__ = ["BudgetCheck", "check_budget"]


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
