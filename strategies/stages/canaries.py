"""Stages 4 and 7, canaries: with canaries on, each declared reply's update without the
canaries' share (what is verified and aggregated) and the canaries' score (:class:`~strategies.
canary_audit.CanaryAuditor`); after verification, the canaries' verdict joins the reply's
(a lower bound on ε: it can refute the declared noise, never verify it)."""

from __future__ import annotations

import dataclasses

from fedpriv.verification import combine_verdicts
from strategies.stages.base import Reply, Round, declared
from strategies.step_releases import canary_step_share

__all__ = ["canary_verdict", "remove_canaries"]


def remove_canaries(batch: list[Reply], rnd: Round) -> None:
    auditor = rnd.run.canaries
    for reply in declared(batch):
        report, cid, accepted = reply.report, reply.client_id, reply.accepted
        assert report is not None and accepted is not None
        reply.clean = auditor.without_canaries(rnd.number, cid, report, accepted.arrays)
        reply.canary = auditor.score(rnd.number, cid, report, reply.flat)
        if accepted.releases is not None:
            design = auditor.design(rnd.number, cid, report.mechanism, reply.dim)
            reply.share = canary_step_share(design, report)


def canary_verdict(batch: list[Reply], rnd: Round) -> None:
    for reply in declared(batch):
        if reply.canary is not None and reply.verdict is not None:
            reply.verdict = combine_verdicts([dataclasses.replace(reply.verdict, test="update"),
                                              reply.canary.verdict])
