"""Stage 11, attack schedule: each reply the attack plan asks for is scheduled — a declared
one as the server sees its update without canaries (in steps mode its first step's release
alone: the threat model), an undeclared one as a pseudo-gradient read with the run's
``[train]`` settings; then a reply with canaries is aggregated without them."""

from __future__ import annotations

from strategies.attack_views import declared_view, undeclared_view
from strategies.canary_audit import with_arrays
from strategies.stages.base import Reply, Round, live
from strategies.step_releases import first_step_truth, first_step_view

__all__ = ["schedule"]


def _view(reply: Reply, rnd: Round) -> object:
    run, report, accepted = rnd.run, reply.report, reply.accepted
    assert accepted is not None
    if report is None:
        return undeclared_view(run.model, rnd.broadcast, reply.delta, run.train)
    if accepted.releases is not None:  # the first step's release alone (threat model)
        reply.truth = first_step_truth(report) if reply.truth else reply.truth
        return first_step_view(run.model, rnd.broadcast, accepted.releases, report,
                               reply.share)
    own = reply.delta if reply.clean is None else [
        a - b for a, b in zip(reply.clean, rnd.broadcast, strict=True)]
    return declared_view(run.model, rnd.broadcast, own, report)


def schedule(batch: list[Reply], rnd: Round) -> None:
    for reply in live(batch):
        if reply.attacked:  # scored against the oracle's truth, or kept unscored without it
            view = _view(reply, rnd)
            rnd.run.plan.add(rnd.number, reply.client_id, view, reply.truth)
        if reply.clean is not None:
            with_arrays(reply.message, reply.clean)  # aggregate without the canaries
