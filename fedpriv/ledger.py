"""The privacy ledger: every client's releases folded into its cumulative tallies.

Flower-free and store-free: the auditing server folds each accepted round of a client into the
ledger and writes the returned tally; ``--resume`` rebuilds the ledger by folding the stored
rounds again, in the same order, which gives the same tallies. Per client it keeps

* the accountant's ledger of :class:`~fedpriv.accounting.events.ReleaseEvent` — cumulative ε at
  δ over every release (privacy-math.md §3);
* the cumulative log Bayes capacity, summed over releases (an upper bound, §5);
* the cumulative MBP bound ξ (pure LDP parameters add) and the ABP bound it implies (§6).

Secrets are measured in sensitivities: record level ``r = 1`` (one example, ``r = C``), batch
level ``r = L`` (§5, "Which r and s").

Clients with the same history of releases have the same ε and capacities: both are computed
once per distinct history (and per distinct release), not once per client, so folding a round
of N clients costs O(distinct histories) accounting, not O(N) (issue #16).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fedpriv.accounting import AccountingResult, ClientAccountant, Release, ReleaseEvent
from fedpriv.accounting import epsilon as account
from fedpriv.leakage.bayesian import abp_bound
from fedpriv.leakage.capacity import THREAT_MODELS
from fedpriv.validate import check_dim

__all__ = ["ClientLedger", "PrivacyLedger", "secret_radius_units"]


def secret_radius_units(threat_model: str, batch_size: float) -> float:
    """The secret radius in sensitivities: 1 (record level) or ``L`` (batch level)."""
    if threat_model not in THREAT_MODELS:
        raise ValueError(f"threat model {threat_model!r} not in {THREAT_MODELS}")
    return 1.0 if threat_model == "record" else float(batch_size)


@lru_cache(maxsize=4096)
def _cumulative(
    events: tuple[ReleaseEvent, ...], delta: float, accountant: str, route: str,
    discretization: float | None,
) -> AccountingResult:
    """ε of a release history, shared by every client with that history."""
    return account(events, delta, accountant=accountant, route=route,
                   discretization=discretization)


@lru_cache(maxsize=1024)
def _log_capacity(release: Release, dim: int, radius: float) -> float:
    return release.log_bayes_capacity(dim, radius)


@dataclass
class ClientLedger:
    """One client's running totals (cumulative over every release it made)."""

    accountant: ClientAccountant
    releases: int = 0
    log_capacity: float = 0.0
    mbp_bound: float = 0.0
    rounds: list[int] = field(default_factory=list)


class PrivacyLedger:
    """Per-client tallies of a run.

    Parameters
    ----------
    delta
        δ of the reported ε.
    accountant
        ``"rdp"`` or ``"pld"`` (:class:`~fedpriv.accounting.ClientAccountant`).
    threat_model
        ``"record"`` or ``"batch"``: the secret the capacity and ξ are about.
    """

    def __init__(self, delta: float, accountant: str = "rdp", threat_model: str = "record"):
        self.delta, self.accountant, self.threat_model = delta, accountant, threat_model
        self.clients: dict[int, ClientLedger] = {}

    def __iter__(self) -> Iterator[int]:
        return iter(self.clients)

    def fold(
        self, rnd: int, client_id: int, release: Release, *, steps: int, sample_rate: float,
        batch_size: float, dim: int,
    ) -> dict[str, Any]:
        """Add one round's ``steps`` Poisson-sampled releases; return the cumulative tally row
        (the audit store's ``tallies`` columns)."""
        steps = check_dim("steps", steps)
        ledger = self.clients.setdefault(client_id, ClientLedger(ClientAccountant(self.accountant)))
        ledger.accountant.record(release, sample_rate, steps)
        radius = secret_radius_units(self.threat_model, batch_size)
        round_capacity = steps * _log_capacity(release, dim, radius)
        ledger.releases += steps
        ledger.log_capacity += round_capacity
        ledger.mbp_bound += steps * release.pure_ldp_epsilon(radius)
        ledger.rounds.append(rnd)
        acc = ledger.accountant
        acct = _cumulative(acc.events, self.delta, acc.accountant, acc.route, acc.discretization)
        return {
            "epsilon": acct.epsilon, "delta": self.delta, "accountant": acct.accountant,
            "route": acct.route, "optimal_order": acct.optimal_order, "compose": "per-step",
            "releases": ledger.releases, "log_capacity_round": round_capacity,
            "log_capacity_cumulative": ledger.log_capacity, "threat_model": self.threat_model,
            "mbp_bound": ledger.mbp_bound, "abp_bound": abp_bound(ledger.mbp_bound),
        }  # fmt: skip

    def mbp_bound(self, client_id: int) -> float:
        """The client's cumulative MBP bound ξ so far (``0`` before any release)."""
        ledger = self.clients.get(client_id)
        return 0.0 if ledger is None else ledger.mbp_bound
