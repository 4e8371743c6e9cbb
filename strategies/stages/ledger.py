"""Stage 9, ledger fold: each reply's verdict summarised with its per-property verdicts and
label (:func:`~strategies.reply_verdicts.verdict_summary`), and its releases folded into the
client's privacy ledger — cumulative ε at δ, log Bayes capacity, MBP/ABP bounds (the noise bounds
of ``epsilon_observed`` of replies sharing a declaration found at once); an undeclared reply
tallied with no guarantee. A fold that fails (all or nothing) turns the reply down."""

from __future__ import annotations

from fedpriv.verification.observed import round_bounds
from strategies.replies import Rejection
from strategies.reply_verdicts import fold_verdicts, verdict_summary
from strategies.stages.base import Reply, Round, live, reject

__all__ = ["fold"]


def fold(batch: list[Reply], rnd: Round) -> None:
    run = rnd.run
    replies = live(batch)
    bounds = round_bounds([  # the noise bounds of a declaration's replies found together
        (r.client_id, run.ledger.observed.get(r.client_id),
         r.observation if r.report is not None else None) for r in replies])
    for reply, bound in zip(replies, bounds, strict=True):
        report, cid = reply.report, reply.client_id
        assert reply.verdict is not None
        if report is None:
            reply.summary = verdict_summary(reply.verdict)
            reply.tally = run.ledger.fold_undeclared(rnd.number, cid)
            continue
        reply.summary = verdict_summary(reply.verdict, report.mechanism.level)
        reply.release = report.mechanism.release(reply.dim)
        try:  # asked beforehand (accountable): a surprise here is still the client's alone
            reply.tally = run.ledger.fold(
                rnd.number, cid, reply.release, steps=report.releases,
                **report.release_sampling, batch_size=report.secret_batch, dim=reply.dim,
                **fold_verdicts(reply.summary),
                accuracy=run.accuracy(report, reply.dim),
                unit=report.mechanism.level, observation=reply.observation,
                observed_bound=bound)
        except Exception as exc:  # noqa: BLE001 - the fold is all or nothing (PrivacyLedger)
            run.written.discard(cid)
            reject(run, rnd.number, Rejection(reply.node, cid, "unaccountable",
                                              "unaccountable declaration: the tally fails: "
                                              f"{type(exc).__name__}: {exc}", report), reply)
