"""Stage 6, fresh noise: a verified Gaussian release tested against the client's earlier
updates (:func:`~strategies.reply_verdicts.fresh_noise`); it can refute the round, never verify
it — a precondition of the reply's verdict."""

from __future__ import annotations

from fedpriv.verification import with_preconditions
from strategies.reply_verdicts import fresh_noise as fresh_noise_test
from strategies.stages.base import Reply, Round, declared

__all__ = ["fresh_noise"]


def fresh_noise(batch: list[Reply], rnd: Round) -> None:
    _, theta_norm = rnd.theta
    for reply in declared(batch):
        if not reply.fresh:
            continue
        assert reply.report is not None and reply.flat is not None and reply.verdict is not None
        fresh = fresh_noise_test(rnd.run.sketches_of(reply.flat.size), reply.client_id,
                                 reply.report, reply.flat, theta_norm, rnd.run.audit.verify_alpha)
        if fresh is not None:
            reply.verdict = with_preconditions(reply.verdict, [fresh])
