"""Stage 2's answers are computed once per distinct history and declaration (issue 37), and
each reply gets the answer its own computation gives: a mixed batch — two mechanisms, clients
with different histories, an unaccountable claim, a size the server does not know, a client
whose canaries cannot be accounted — asked with and without the answers kept."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

from fedpriv.instructions import instructed_report
from fedpriv.kept import KeptAnswers
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import build_mechanism
from strategies.identity import ENGINE, NodeBinding
from strategies.stages.accountable import unaccountable
from workflows.config import load_config

MIXED = Path(__file__).resolve().parents[1] / "configs" / "mixed-mechanisms.toml"

DIM = 13_700


class _Canaries:
    """A canary auditor that cannot account client 7's canaries alone."""

    @staticmethod
    def unaccountable(rnd, client, report, dim):
        return "the round's canary epsilon: no" if client == 7 else None


def _run() -> SimpleNamespace:
    ledger = PrivacyLedger(1e-5, "pld")
    gauss = build_mechanism("gaussian", {"noise_multiplier": 1.0}).release(DIM)
    for client in (0, 1, 2):  # 0 and 1 share a history, 2 has one of its own
        for rnd in (1, 2) if client < 2 else (1,):
            ledger.fold(rnd, client, gauss, steps=1, sample_rate=0.5, batch_size=32, dim=DIM)
    return SimpleNamespace(
        ledger=ledger, canaries=_Canaries(),
        binding=NodeBinding({}, {c: 60 for c in range(9)}, ENGINE),
        accuracy=lambda report, dim: report.mechanism.pac_accuracy(0.01, dim, report.divisor))


def test_kept_answers_are_each_replys_own():
    cfg = load_config(MIXED, [])
    reports = [instructed_report(cfg, cid, 3, 60) for cid in range(10)]
    tiny = build_mechanism("gaussian", {"noise_multiplier": 1e-3})
    reports += [dataclasses.replace(reports[8], partition_id=c, mechanism=tiny,
                                    local_steps=100_000) for c in (0, 1)]
    reports += [dataclasses.replace(reports[8], partition_id=c, local_examples=90,
                                    sample_rate=32 / 90) for c in (1, 9)]
    run, kept = _run(), KeptAnswers(64)
    answers = [unaccountable(run, 3, r.partition_id, r, DIM, kept) for r in reports]
    assert answers == [unaccountable(_run(), 3, r.partition_id, r, DIM) for r in reports]
    assert answers[7] == "the round's canary epsilon: no"
    assert answers[10] is not None and answers[10] == answers[11]
    assert answers.count(None) == len(reports) - 3
    # one answer per history and declaration: 0 and 1 share theirs, 2 has its own, 3 … 9 none
    # yet; mechanisms by pairs of clients (mixed-mechanisms), but the server knows no size of
    # client 9; two cheats of each kind
    assert len(kept) == 10
