"""Stage 7, per-record sensitivity: under the labelled simulation oracle
(``audit.ground_truth``), the release's clipped signal recomputed from the records it used and
the residual tested as the declared noise law; in steps mode also each step's noise against the
round's earlier steps (:class:`strategies.sensitivity_replay.SensitivityReplay`, issue 42). A
precondition of the reply's verdict, speaking to ``sensitivity`` and ``fresh-noise``.

The client's cross-round evidence (``sensitivity-rounds``) is written here, as soon as it
changes, as its ``memory`` row (``--resume`` rebuilds it: ``AuditPipeline.restore``), so a reply
turned down by a later stage counts in a resumed run as in an uninterrupted one."""

from __future__ import annotations

from strategies.sensitivity_replay import MEMORY_KIND
from strategies.stages.base import Reply, Round, declared

__all__ = ["sensitivity"]


def sensitivity(batch: list[Reply], rnd: Round) -> None:
    replay = rnd.run.replay
    for reply in declared(batch):
        if not reply.fresh or replay is None:
            continue
        assert reply.report is not None and reply.accepted is not None
        reply.verdict = replay.joined(reply.verdict, reply.client_id, reply.report,
                                      rnd.broadcast, reply.recovered, reply.accepted.releases,
                                      reply.share, alpha=rnd.run.audit.verify_alpha)
        if (state := replay.memory(reply.client_id)) is not None:
            rnd.run.store.write_memory(rnd.number, reply.client_id, MEMORY_KIND, state)
