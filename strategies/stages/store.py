"""Stage 10, store write: what the audit remembers of each reply (its replay sketch when
consistent, its canaries' pool), its ``updates`` row — the update itself by the storage policy
(``audit.store_updates``: kept, or only when attacked) — an inconsistent reply's failure, the
oracle's ground truth (scoring only) and the client's tally with its verdict. Each reply's rows
are laid out here and the batch's written at once (:meth:`fedpriv.audit.AuditStore.
write_replies`: one statement per table, not one per row)."""

from __future__ import annotations

from fedpriv.audit.reply_rows import ReplyRows
from fedpriv.audit.storage import encode_update, keeps_update
from fedpriv.audit.tensors import Arrays
from fedpriv.failures import log_first
from strategies.reply_verdicts import update_row, verdict_line
from strategies.stages.base import Reply, Round, live, log

__all__ = ["write"]


def _ground_truth(reply: Reply, rnd: Round) -> tuple[list[int], Arrays | None] | None:
    """What the oracle told: every record the round used, in order of first use, with images
    and labels; None without the oracle. The ids are the reply's ``truth``."""
    report = reply.report
    if report is None or report.oracle is None:
        return None
    ids = list(dict.fromkeys(i for batch in report.oracle.record_ids for i in batch))
    images, labels = rnd.run.truth(ids)
    reply.truth = ids
    return ids, ({"images": images, "labels": labels} if ids else None)


def _undeclared(reply: Reply, rnd: Round, stored: Arrays | None) -> ReplyRows:
    """An update that came without a report: stored with status ``undeclared``."""
    accepted = reply.accepted
    assert accepted is not None
    return ReplyRows(  # num-examples as claimed: an integer in [1, 2^63 - 1]
        reply.client_id,
        {"node_id": reply.node, "num_examples": int(accepted.weight), "formal_guarantee": False,
         "pseudo_gradient": True, "status": "undeclared"},
        {**reply.tally, "verification": reply.summary}, stored)


def _declared(reply: Reply, rnd: Round, stored: Arrays | None) -> ReplyRows:
    """A reply with a report: its sketch (consistent) and canaries remembered, its failure
    (inconsistent), its true batch (kept or attacked) and its tally with the verdict."""
    run, cid, report, verdict = rnd.run, reply.client_id, reply.report, reply.verdict
    assert report is not None and verdict is not None and reply.flat is not None
    memory = {}
    if reply.consistent:  # remembered in the store too: --resume rebuilds it (restore)
        memory["sketch"] = run.sketches_of(reply.dim).add(rnd.number, cid, reply.flat)
    if reply.canary is not None:
        memory["canaries"] = reply.canary.memory
    row, failure = update_row(report, reply.node, reply.release), None
    if not reply.consistent:
        line = verdict_line(verdict)
        row.update(status="inconsistent", error=verdict.reason)
        failure = ("inconsistent", line)
        log_first(log, run.logged, cid, "inconsistent", line,
                  "round %d client %d: %s", rnd.number, cid, line)
    truth = _ground_truth(reply, rnd) if stored is not None or reply.attacked else None
    lower = None if reply.canary is None else reply.canary.lower
    tally = {**reply.tally, "verification": reply.summary, "epsilon_lower": lower,
             "epsilon_budget": report.epsilon_budget}
    return ReplyRows(cid, row, tally, stored, memory, failure, truth)


def write(batch: list[Reply], rnd: Round) -> None:
    """Lay out every live reply's rows, in reply order, and write them in one call."""
    audit, rows = rnd.run.audit, []
    for reply in live(batch):
        reply.attacked = reply.client_id in rnd.attacked  # chosen over the round (run_round)
        kept = keeps_update(audit.store_updates, reply.attacked)  # the storage policy
        stored = encode_update(reply.delta, audit.update_dtype) if kept else None
        rows.append((_undeclared if reply.report is None else _declared)(reply, rnd, stored))
    rnd.run.store.write_replies(rnd.number, rows)
