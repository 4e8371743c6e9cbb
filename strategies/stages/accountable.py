"""Stage 2, accountable: a declared reply the run can account — its oracle's record ids within
the training set, and its releases foldable into the client's ledger (the run's accountant over
the client's history, its capacity and bounds, the PAC accuracy) and, with canaries, the
round's canary ε — asked before anything of it is stored, scored or folded, at the sampling the
fold accounts (q = 1 at a size the server did not verify: :func:`fedpriv.ledger.
accounted_sampling`)."""

from __future__ import annotations

from fedpriv.instructions import size_verdict
from fedpriv.kept import KeptAnswers
from fedpriv.protocol import ClientReport
from strategies.replies import Rejection
from strategies.stages.base import Reply, Round, RunState, declared, reject

__all__ = ["accountable", "unaccountable"]

_KEPT_ANSWERS = 4096
"""Most ledger answers a round keeps (distinct histories and declarations)."""


def unaccountable(run: RunState, rnd: int, cid: int, report: ClientReport, dim: int,
                  kept: KeptAnswers[tuple] | None = None) -> str | None:
    """Why the run cannot account what the report declares (None: it can):
    :meth:`~fedpriv.ledger.PrivacyLedger.unaccountable` and
    :meth:`~strategies.canary_audit.CanaryAuditor.unaccountable`. ``kept``: the answers of the
    first, per distinct history (the client's shared ledger) and declaration, which a round's
    clients share (issue 37)."""
    history = run.ledger.clients.get(cid)
    # everything the ledger's answer reads of the report and the run (validated values)
    key = (id(history), dim, report.mechanism, report.local_steps, report.sample_rate,
           report.local_examples, report.sampling, report.batch_size,
           run.binding.sizes.get(cid))
    # kept with the ledger, whose id stays its own while kept
    found = (history, _ledger_unaccountable(run, cid, report, dim)) if kept is None else \
        kept.get(key, lambda: (history, _ledger_unaccountable(run, cid, report, dim)))
    return found[1] or run.canaries.unaccountable(rnd, cid, report, dim)


def _ledger_unaccountable(run: RunState, cid: int, report: ClientReport, dim: int) -> str | None:
    """:func:`unaccountable`'s ledger part: the release, the PAC accuracy and the fold."""
    try:
        release = report.mechanism.release(dim)
        run.accuracy(report, dim)
    except Exception as exc:  # noqa: BLE001 - a declaration the tally cannot read
        return f"{type(exc).__name__}: {exc}"
    # at the sampling the fold will account (fedpriv.ledger.accounted_sampling): the claimed
    # one only at a size the server knows and the reply declares (size_verdict, as stage 8)
    known = size_verdict(run.binding.sizes.get(cid), report, run.binding.source)
    return run.ledger.unaccountable(
        cid, release, steps=report.releases, **report.release_sampling,
        batch_size=report.secret_batch, dim=dim, unit=report.mechanism.level,
        size_verified=known.status == "consistent")


def accountable(batch: list[Reply], rnd: Round) -> None:
    run, size = rnd.run, len(rnd.run.dataset.train_y)
    kept: KeptAnswers[tuple] = KeptAnswers(_KEPT_ANSWERS)  # per history and declaration
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
        elif (what := unaccountable(run, rnd.number, cid, report, reply.dim, kept)) is not None:
            kind, why = "unaccountable", f"unaccountable declaration: {what}"
        if why is not None:
            run.written.discard(cid)  # its updates row is the rejection's
            reject(run, rnd.number, Rejection(reply.node, cid, kind, why, report), reply)
