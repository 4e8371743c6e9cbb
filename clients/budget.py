"""The ClientApp's ε budget: its own count of releases, and whether it trains this round.

**Where the state lives.** A client's releases so far are one count in Flower's per-node
``context.state`` (a ConfigRecord under :data:`STATE`): it persists across the rounds of a run
for that node, in simulation (Ray actors serve many nodes; the state is per node) and in
deployment (the SuperNode keeps it), and the count is enough because a client's mechanism, rate
and steps are fixed for a run. What ``context.state`` does not survive is a new Flower run — a
``--resume`` — or a restarted SuperNode; for those the server sends, with every train message,
the releases its ledger accounted per client (:data:`fedpriv.budget.RELEASES_KEY`), and the
client counts the larger of the two. A client can only be made more careful by it.

Every round the client counts, trains or not, what it released: a reply the server rejects was
still seen by the server, so it counts here (the server's ledger counts accepted releases only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.app import ConfigRecord, Context

from fedpriv.accounting.sampling import level_relation
from fedpriv.audit.config import AuditConfig
from fedpriv.budget import RELEASES_KEY, BudgetCheck, check_budget, decode_releases
from fedpriv.mechanisms import Mechanism

__all__ = ["STATE", "budget_check", "record_releases", "releases_so_far"]

STATE = "fedpriv-budget"
"""Key of the client's ConfigRecord in ``context.state``: ``{"releases": int}``."""


def releases_so_far(context: Context, config: Mapping[str, Any], client_id: int) -> int:
    """The client's releases in earlier rounds: its own count, or the server's if larger."""
    own = 0
    if STATE in context.state.config_records:
        own = int(context.state.config_records[STATE]["releases"])
    server = 0
    if RELEASES_KEY in config:
        server = decode_releases(config[RELEASES_KEY], client_id)
    return max(own, server)


def record_releases(context: Context, releases: int) -> None:
    """Keep the client's count of releases for its next round."""
    context.state[STATE] = ConfigRecord({"releases": int(releases)})


def budget_check(
    budget: float | None, mechanism: Mechanism, audit: AuditConfig, *, released: int,
    sample_rate: float, steps: int, dim: int, population: int | None = None,
) -> BudgetCheck | None:
    """Whether the coming round of ``steps`` local steps keeps the client within its ε
    ``budget`` (``MechanismConfig.budget_for``; None: it has none), at ``audit.delta`` with
    ``audit.accountant``, as the server's ledger accounts it."""
    if budget is None:
        return None
    relation = level_relation(mechanism.level, audit.neighbouring)  # as the ledger takes it
    return check_budget(budget, mechanism.release(dim), sample_rate=sample_rate,
                        released=released, steps=steps, delta=audit.delta,
                        accountant=audit.accountant, population=population,
                        neighbouring=relation)
