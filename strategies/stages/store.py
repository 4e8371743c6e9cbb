"""Stage 10, store write: what the audit remembers of each reply (its replay sketch when
consistent, its canaries' pool), its ``updates`` row — the update itself by the storage policy
(``audit.store_updates``: kept, or only when attacked) — an inconsistent reply's failure, the
oracle's ground truth (scoring only) and the client's tally with its verdict."""

from __future__ import annotations

from fedpriv.audit.storage import encode_update, keeps_update
from fedpriv.failures import log_first
from strategies.reply_verdicts import update_row, verdict_line
from strategies.stages.base import Reply, Round, live, log

__all__ = ["write"]


def _ground_truth(reply: Reply, rnd: Round) -> list[int]:
    """Store what the oracle told: every record the round used, in order of first use, with
    images and labels; return their ids (empty without the oracle)."""
    report = reply.report
    if report is None or report.oracle is None:
        return []
    ids = list(dict.fromkeys(i for batch in report.oracle.record_ids for i in batch))
    images, labels = rnd.run.truth(ids)
    arrays = {"images": images, "labels": labels} if ids else None
    rnd.run.store.write_ground_truth(rnd.number, reply.client_id, ids, arrays)
    return ids


def _undeclared(reply: Reply, rnd: Round, stored: dict | None) -> None:
    """An update that came without a report: stored with status ``undeclared``."""
    run, cid, accepted = rnd.run, reply.client_id, reply.accepted
    assert accepted is not None
    run.store.write_update(  # num-examples as claimed: an integer in [1, 2^63 - 1]
        rnd.number, cid, stored,
        {"node_id": reply.node, "num_examples": int(accepted.weight), "formal_guarantee": False,
         "pseudo_gradient": True, "status": "undeclared"})
    run.store.write_tally(rnd.number, cid, {**reply.tally, "verification": reply.summary})


def _declared(reply: Reply, rnd: Round, stored: dict | None) -> None:
    run, cid, report, verdict = rnd.run, reply.client_id, reply.report, reply.verdict
    assert report is not None and verdict is not None and reply.flat is not None
    store, number = run.store, rnd.number
    if reply.consistent:  # remembered in the store too: --resume rebuilds it (restore)
        store.write_memory(number, cid, "sketch", run.sketches_of(reply.dim).add(
            number, cid, reply.flat))
    if reply.canary is not None:
        store.write_memory(number, cid, "canaries", reply.canary.memory)
    row = update_row(report, reply.node, reply.release)
    if not reply.consistent:
        row.update(status="inconsistent", error=verdict.reason)
        store.record_failure(number, "inconsistent", verdict_line(verdict), client_id=cid,
                             node_id=reply.node)
        log_first(log, run.logged, cid, "inconsistent", verdict_line(verdict),
                  "round %d client %d: %s", number, cid, verdict_line(verdict))
    store.write_update(number, cid, stored, row)
    reply.truth = _ground_truth(reply, rnd) if stored is not None or reply.attacked else []
    lower = None if reply.canary is None else reply.canary.lower
    store.write_tally(number, cid, {**reply.tally, "verification": reply.summary,
                                    "epsilon_lower": lower,
                                    "epsilon_budget": report.epsilon_budget})


def write(batch: list[Reply], rnd: Round) -> None:
    audit = rnd.run.audit
    for reply in live(batch):
        reply.attacked = rnd.run.plan.scheduled(rnd.number, reply.client_id)
        kept = keeps_update(audit.store_updates, reply.attacked)  # the storage policy
        stored = encode_update(reply.delta, audit.update_dtype) if kept else None
        (_undeclared if reply.report is None else _declared)(reply, rnd, stored)
