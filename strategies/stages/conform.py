"""Stage 1, conform: each reply checked against θ, its array names and the round's identities
(:func:`strategies.replies.check_reply`: schema, shapes, finiteness, who it claims to be); a
rejection is that client's failure, recorded, never raised. In order: a reply's identity
depends on the replies before it (a second claim of a client is a duplicate)."""

from __future__ import annotations

from strategies.replies import Rejection, check_reply
from strategies.stages.base import Reply, Round, reject
from strategies.step_releases import strip_steps

__all__ = ["conform"]


def conform(batch: list[Reply], rnd: Round) -> None:
    run = rnd.run
    assert run.identities is not None
    for reply in batch:
        outcome = check_reply(reply.message, rnd.broadcast, run.identities, node=reply.node,
                              names=rnd.names, undeclared=run.audit.undeclared,
                              steps=run.audit.release == "steps")
        if isinstance(outcome, Rejection):
            reject(run, rnd.number, outcome, reply)
            continue
        strip_steps(outcome.message)  # the inner strategy aggregates the update alone
        reply.accepted = outcome
        if run.audit.enabled:
            run.written.add(outcome.client_id)  # its updates row is this round's
