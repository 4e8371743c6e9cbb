"""Stage 5, verification: each declared reply's update tested against its declaration — a
replay of the client's earlier update is inconsistent outright; else the update is recovered
once (:func:`~strategies.reply_verdicts.recovered_reply`), verified (in steps mode recomposed,
then every step tested: :func:`~strategies.step_releases.verify_step_reply`) and observed
(``epsilon_observed``). An undeclared reply's verdict says so.

The replies whose reports share a declaration and mechanism (a round's usual case: every
client runs the same configuration) are recovered and verified together
(:func:`~strategies.reply_verdicts.recovered_together`,
:func:`~strategies.reply_verdicts.verified_together`: ``Mechanism.verify_many``), which do what
depends on the declaration alone once and take the updates' statistics a block at a time and
the tests' p-values for all of them at once; each verdict is the one
:func:`~strategies.reply_verdicts.verified_or_inconsistent` gives the reply alone."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from fedpriv.protocol import ClientReport
from fedpriv.verification import Verdict
from strategies.replies import UNDECLARED, AcceptedReply
from strategies.reply_verdicts import observed_together, recovered_together, verified_together
from strategies.stages.base import Reply, Round, live
from strategies.step_releases import verify_step_reply

__all__ = ["verify"]


def _replays(replies: list[Reply], rnd: Round) -> list[int | None]:
    """The round each reply's update repeats of its client's earlier updates, or None
    (:meth:`~fedpriv.verification.replay.UpdateSketches.replays_of`, all at once)."""
    if not replies:
        return []
    sketches = rnd.run.sketches_of(replies[0].dim)
    return sketches.replays_of([r.client_id for r in replies], [_flat(r) for r in replies])


def _flat(reply: Reply) -> np.ndarray:
    """A declared reply's flattened Δ (the update stage sets it for every declared reply)."""
    assert reply.flat is not None
    return reply.flat


def _declared_as(report: ClientReport) -> Hashable:
    """What replies verified together share: the declaration and the mechanism (both
    compared by value). A report whose fields do not hash, or whose declaration raises (a
    hostile report), is a group of its own: recovering it alone says why, and one reply
    never stops the round."""
    try:
        key = (report.declaration(), report.mechanism)
        hash(key)
    except Exception:  # noqa: BLE001 - whatever a hostile report makes them raise
        return id(report)
    return key


def _accepted(reply: Reply) -> AcceptedReply:
    """A live reply's accepted form (the conform stage sets it, or rejects the reply)."""
    assert reply.accepted is not None
    return reply.accepted


def _verified(group: list[Reply], rnd: Round) -> None:
    """Recover, observe and verify fresh replies that share a declaration and mechanism."""
    report, alpha = group[0].report, rnd.run.audit.verify_alpha
    assert report is not None
    arrays = [_accepted(r).arrays if r.clean is None else r.clean for r in group]
    recovered = recovered_together(report, rnd.theta[0], arrays)
    for reply, update, observation in zip(group, recovered,
                                          observed_together(report, recovered), strict=True):
        reply.recovered, reply.observation = update, observation
    updates = [r for r in group if _accepted(r).releases is None]
    for reply, verdict in zip(updates, verified_together(
            report, [r.recovered for r in updates], alpha), strict=True):
        reply.verdict = verdict
    for reply in group:
        accepted = _accepted(reply)
        if accepted.releases is not None:
            assert accepted.report is not None
            reply.verdict = verify_step_reply(accepted.report, rnd.broadcast, accepted.arrays,
                                              accepted.releases, alpha, reply.share)


def verify(batch: list[Reply], rnd: Round) -> None:
    fresh: dict[Hashable, list[Reply]] = {}
    replies = live(batch)
    declared: list[tuple[Reply, ClientReport]] = []
    for reply in replies:
        if reply.report is None:
            reply.verdict = Verdict("declaration", "undeclared", UNDECLARED)
        else:
            declared.append((reply, reply.report))
    for (reply, report), replayed in zip(
            declared, _replays([r for r, _ in declared], rnd), strict=True):
        if replayed is not None:
            reply.verdict = Verdict("replay", "inconsistent", "the update repeats this "
                                    f"client's update of round {replayed}", p_value=0.0,
                                    speaks_to=("fresh-noise",))
        else:
            reply.fresh = True
            fresh.setdefault(_declared_as(report), []).append(reply)
    for group in fresh.values():
        _verified(group, rnd)
