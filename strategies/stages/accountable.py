"""Stage 2, accountable: a declared reply the run can account — its oracle's record ids within
the training set, and its releases foldable into the client's ledger (the run's accountant over
the client's history, its capacity and bounds, the PAC accuracy) and, with canaries, the
round's canary ε — asked before anything of it is stored, scored or folded, at the sampling the
fold accounts (q = 1 at a size the server did not verify: :func:`fedpriv.ledger.
accounted_sampling`)."""

from __future__ import annotations

from fedpriv.instructions import size_verdict
from fedpriv.protocol import ClientReport
from strategies.replies import Rejection
from strategies.stages.base import Reply, Round, RunState, declared, reject

__all__ = ["accountable", "unaccountable"]


def unaccountable(run: RunState, rnd: int, cid: int, report: ClientReport, dim: int) -> str | None:
    """Why the run cannot account what the report declares (None: it can):
    :meth:`~fedpriv.ledger.PrivacyLedger.unaccountable` and
    :meth:`~strategies.canary_audit.CanaryAuditor.unaccountable`."""
    try:
        release = report.mechanism.release(dim)
        run.accuracy(report, dim)
    except Exception as exc:  # noqa: BLE001 - a declaration the tally cannot read
        return f"{type(exc).__name__}: {exc}"
    # at the sampling the fold will account (fedpriv.ledger.accounted_sampling): the claimed
    # one only at a size the server knows and the reply declares (size_verdict, as stage 8)
    known = size_verdict(run.binding.sizes.get(cid), report, run.binding.source)
    return (run.ledger.unaccountable(
        cid, release, steps=report.releases, **report.release_sampling,
        batch_size=report.secret_batch, dim=dim, unit=report.mechanism.level,
        size_verified=known.status == "consistent")
        or run.canaries.unaccountable(rnd, cid, report, dim))


def accountable(batch: list[Reply], rnd: Round) -> None:
    run, size = rnd.run, len(rnd.run.dataset.train_y)
    for reply in declared(batch):
        report, cid = reply.report, reply.client_id
        assert report is not None
        reply.dim = run.dim  # conform refused any reply whose shapes are not θ's
        why = None
        if report.oracle is not None and any(
            i >= size for batch_ids in report.oracle.record_ids for i in batch_ids
        ):
            kind, why = "malformed", "malformed reply: reply field 'record-ids': outside the " \
                                     "training set"
        elif (what := unaccountable(run, rnd.number, cid, report, reply.dim)) is not None:
            kind, why = "unaccountable", f"unaccountable declaration: {what}"
        if why is not None:
            run.written.discard(cid)  # its updates row is the rejection's
            reject(run, rnd.number, Rejection(reply.node, cid, kind, why, report), reply)
