"""Stage 6, fresh noise: a verified Gaussian release tested against the client's earlier
updates at its scale (:func:`~strategies.reply_verdicts.fresh_noise_scale`); it can refute the
round, never verify it — a precondition of the reply's verdict. The round's replies are tested
together (:meth:`~fedpriv.verification.replay.UpdateSketches.fresh_noise_tests`, issue 37)."""

from __future__ import annotations

from fedpriv.verification import with_preconditions
from strategies.reply_verdicts import fresh_noise_scale
from strategies.stages.base import Reply, Round, declared

__all__ = ["fresh_noise"]


def fresh_noise(batch: list[Reply], rnd: Round) -> None:
    _, theta_norm = rnd.theta
    tested, tests = [], []
    for reply in declared(batch):
        if not reply.fresh:
            continue
        assert reply.report is not None and reply.flat is not None and reply.verdict is not None
        scale = fresh_noise_scale(reply.report, reply.flat, theta_norm)
        if scale is not None:
            tested.append(reply)
            tests.append((reply.client_id, reply.flat, *scale))
    if not tests:
        return
    sketches = rnd.run.sketches_of(tests[0][1].size)  # one per run: every update is θ's size
    verdicts = sketches.fresh_noise_tests(tests, alpha=rnd.run.audit.verify_alpha)
    for reply, fresh in zip(tested, verdicts, strict=True):
        reply.verdict = with_preconditions(reply.verdict, [fresh])
