"""Stage 5, verification: each declared reply's update tested against its declaration — a
replay of the client's earlier update is inconsistent outright; else the update is recovered
once (:func:`~strategies.reply_verdicts.recovered_reply`), verified (in steps mode recomposed,
then every step tested: :func:`~strategies.step_releases.verify_step_reply`) and observed
(``epsilon_observed``). An undeclared reply's verdict says so."""

from __future__ import annotations

from fedpriv.verification import Verdict
from strategies.replies import UNDECLARED
from strategies.reply_verdicts import observe_reply, recovered_reply, verified_or_inconsistent
from strategies.stages.base import Reply, Round, live
from strategies.step_releases import verify_step_reply

__all__ = ["verify"]


def _verified(reply: Reply, rnd: Round) -> Verdict:
    report, accepted, alpha = reply.report, reply.accepted, rnd.run.audit.verify_alpha
    assert report is not None and accepted is not None and reply.flat is not None
    replayed = rnd.run.sketches_of(reply.dim).replay_of(reply.client_id, reply.flat)
    if replayed is not None:
        return Verdict("replay", "inconsistent", f"the update repeats this client's update of "
                       f"round {replayed}", p_value=0.0, speaks_to=("fresh-noise",))
    reply.fresh = True
    theta, _ = rnd.theta
    arrays = accepted.arrays if reply.clean is None else reply.clean
    recovered = reply.recovered = recovered_reply(report, theta, arrays)
    reply.observation = observe_reply(report, recovered)
    if accepted.releases is None:
        return verified_or_inconsistent(report, theta, arrays, alpha, recovered)
    return verify_step_reply(report, rnd.broadcast, accepted.arrays, accepted.releases, alpha,
                             reply.share)


def verify(batch: list[Reply], rnd: Round) -> None:
    for reply in live(batch):
        reply.verdict = (Verdict("declaration", "undeclared", UNDECLARED)
                         if reply.report is None else _verified(reply, rnd))
