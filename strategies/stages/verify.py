"""Stage 5, verification: each declared reply's update tested against its declaration — a
replay of the client's earlier update is inconsistent outright; else the update is recovered
once (:func:`~strategies.reply_verdicts.recovered_reply`), verified (in steps mode recomposed,
then every step tested: :func:`~strategies.step_releases.verify_step_reply`) and observed
(``epsilon_observed``). An undeclared reply's verdict says so.

The replies whose reports share a declaration and mechanism (a round's usual case: every
client runs the same configuration) are verified together
(:func:`~strategies.reply_verdicts.verified_together`, ``Mechanism.verify_many``), which
computes what depends on the declaration alone once and the tests' p-values for all of them
at once; each verdict is the one :func:`~strategies.reply_verdicts.verified_or_inconsistent`
gives the reply alone."""

from __future__ import annotations

from collections.abc import Hashable

from fedpriv.protocol import ClientReport
from fedpriv.verification import Verdict
from strategies.replies import UNDECLARED
from strategies.reply_verdicts import observe_reply, recovered_reply, verified_together
from strategies.stages.base import Reply, Round, live
from strategies.step_releases import verify_step_reply

__all__ = ["verify"]


def _replayed(reply: Reply, rnd: Round) -> Verdict | None:
    """The verdict of a reply that repeats its client's earlier update, else None."""
    assert reply.flat is not None
    replayed = rnd.run.sketches_of(reply.dim).replay_of(reply.client_id, reply.flat)
    if replayed is None:
        return None
    return Verdict("replay", "inconsistent", f"the update repeats this client's update of "
                   f"round {replayed}", p_value=0.0, speaks_to=("fresh-noise",))


def _recovered(reply: Reply, rnd: Round) -> None:
    """The reply's update recovered and observed (it is fresh: not a replay)."""
    report, accepted = reply.report, reply.accepted
    assert report is not None and accepted is not None
    reply.fresh = True
    arrays = accepted.arrays if reply.clean is None else reply.clean
    reply.recovered = recovered_reply(report, rnd.theta[0], arrays)
    reply.observation = observe_reply(report, reply.recovered)


def _declared_as(report: ClientReport) -> Hashable:
    """What replies verified together share: the declaration and the mechanism (both
    compared by value); a report whose fields do not hash is a group of its own."""
    key = (report.declaration(), report.mechanism)
    try:
        hash(key)
    except TypeError:
        return id(report)
    return key


def verify(batch: list[Reply], rnd: Round) -> None:
    together: dict[Hashable, list[Reply]] = {}
    alpha = rnd.run.audit.verify_alpha
    for reply in live(batch):
        report, accepted = reply.report, reply.accepted
        assert accepted is not None
        if report is None:
            reply.verdict = Verdict("declaration", "undeclared", UNDECLARED)
        elif (replayed := _replayed(reply, rnd)) is not None:
            reply.verdict = replayed
        else:
            _recovered(reply, rnd)
            if accepted.releases is None:
                together.setdefault(_declared_as(report), []).append(reply)
            else:
                reply.verdict = verify_step_reply(report, rnd.broadcast, accepted.arrays,
                                                  accepted.releases, alpha, reply.share)
    for group in together.values():
        assert group[0].report is not None
        verdicts = verified_together(group[0].report, [r.recovered for r in group], alpha)
        for reply, verdict in zip(group, verdicts, strict=True):
            reply.verdict = verdict
