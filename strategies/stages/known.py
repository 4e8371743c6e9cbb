"""Stage 8, identity and size: what the server knows of each declared reply — the settings it
sent, the client's size, the node's identity (:class:`strategies.identity.KnownChecks`) — as
preconditions of its verdict."""

from __future__ import annotations

from fedpriv.verification import with_preconditions
from strategies.identity import KnownChecks
from strategies.stages.base import Reply, Round, declared

__all__ = ["known"]


def known(batch: list[Reply], rnd: Round) -> None:
    run = rnd.run
    checks = KnownChecks(run.config, run.binding, rnd.number)  # what replies share, once
    for reply in declared(batch):
        assert reply.report is not None and reply.verdict is not None
        reply.verdict = with_preconditions(reply.verdict, checks(reply.node, reply.report))
