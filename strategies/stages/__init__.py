"""The server side of a round as an ordered list of stages over the round's batch of replies
(issue 37; architecture.md, "The flow of one round").

Each stage is one module behind one small interface (:data:`~strategies.stages.base.Stage`):
it takes the round's batch of :class:`~strategies.stages.base.Reply` and the
:class:`~strategies.stages.base.Round`, and records on each reply what it finds (its verdict,
tally, rows…) or turns it down (:func:`~strategies.stages.base.reject`). The order is
:data:`STAGES`, here and nowhere else; with auditing off only :data:`CONFORM` runs. A new check
of a reply is one module plus one entry in :data:`STAGES` (``tests/toy_stage.py`` shows one):
it adds its verdict, which says the property it speaks to (``Verdict.speaks_to``), as a
precondition of the reply's verdict, and the label reads it from there.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from strategies.stages import (
    accountable,
    attacks,
    canaries,
    conform,
    fresh_noise,
    known,
    ledger,
    sensitivity,
    store,
    update,
    verify,
)
from strategies.stages.base import Reply, Round, RunState, Stage, live

__all__ = ["CHUNK", "CONFORM", "STAGES", "Reply", "Round", "RunState", "Stage", "paused_gc",
           "run_round"]

STAGES: list[Stage] = [
    conform.conform,           # each reply against θ and the round's identities
    accountable.accountable,   # the run can account the declaration
    update.update,             # Δ = θ_client − θ, flattened once
    canaries.remove_canaries,  # the canaries' share removed and scored
    verify.verify,             # the update against its declaration (replay, recovery, tests)
    fresh_noise.fresh_noise,   # precondition: the noise is not the client's earlier noise
    sensitivity.sensitivity,   # precondition under the oracle: per-record sensitivity replayed
    canaries.canary_verdict,   # the canaries' ε lower bound joins the verdict
    known.known,               # preconditions: settings, size, identity as the server knows
    ledger.fold,               # the verdict's label; the releases into the client's ledger
    store.write,               # memory, updates row, failure, ground truth, tally
    attacks.schedule,          # the attack plan; aggregate without the canaries
]
"""Every stage of an audited round, in order (a list: a new check is one entry)."""

CONFORM: tuple[Stage, ...] = (conform.conform,)
"""What a round runs with auditing off: validate and aggregate, record nothing else."""

CHUNK = 1000
"""Replies the stages after :data:`CONFORM` take at once: a round of 10,000 replies would
otherwise hold every reply's Δ and its flat copy together (~1 GB for the paper MLP)."""


def run_round(batch: list[Reply], rnd: Round, *, audit: bool) -> None:
    """Run the round's stages over its batch: :data:`CONFORM` over the whole round (a reply's
    identity depends on the replies before it); with ``audit`` the clients to attack, chosen
    among the replies :data:`CONFORM` kept, and the rest of :data:`STAGES`, in order, over
    parts of :data:`CHUNK` replies (replies of different clients share nothing a stage
    computes), each part's arrays let go once it is done. A chosen client that a later stage
    turns down is not attacked that round."""
    for stage in CONFORM:
        stage(batch, rnd)
    if audit:  # once over the round, not per part: rotation takes one client a round
        rnd.attacked = rnd.run.plan.scheduled(rnd.number, [r.client_id for r in live(batch)])
    rest = [stage for stage in STAGES if stage not in CONFORM] if audit else []
    for start in range(0, len(batch), CHUNK):
        part = batch[start:start + CHUNK]
        for stage in rest:
            stage(part, rnd)
        for reply in part:
            reply.delta, reply.flat, reply.clean, reply.recovered = [], None, None, None


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a round's batch goes through the stages
    (and is stored): every object a round allocates (replies, verdicts, rows) lives until
    the round ends and is then freed by reference counting, so the collections its
    allocations trigger on the way only walk live objects — measured 0.14 ms per reply at
    1,000 clients (of ~1 ms audited). Collection resumes after the round, as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
