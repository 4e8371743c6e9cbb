"""The privacy ledger shares ε and capacities between clients with one history, and the shared
values are those each client's own accountant gives (an independent, unshared computation)."""

from __future__ import annotations

import pytest

from fedpriv.accounting import ClientAccountant
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import build_mechanism


@pytest.mark.parametrize("accountant", ["rdp", pytest.param("pld", marks=pytest.mark.slow)])
def test_shared_tallies_equal_each_clients_own_accounting(accountant):
    gauss = build_mechanism("gaussian", {"noise_multiplier": 1.2}).release(13_700)
    vmf = build_mechanism("vmf", {"kappa": 500.0}).release(13_700)
    plan = {0: (gauss, 0.25), 1: (gauss, 0.25), 2: (gauss, 0.2), 3: (vmf, 0.25)}
    ledger = PrivacyLedger(1e-5, accountant)
    own = {c: ClientAccountant(accountant) for c in plan}
    capacity = dict.fromkeys(plan, 0.0)
    seen = [0.0]
    for rnd in (1, 2):
        for client, (release, q) in plan.items():
            tally = ledger.fold(rnd, client, release, steps=2, sample_rate=q, batch_size=16,
                                dim=13_700)
            seen.append(tally["epsilon"])
            assert ledger.worst_epsilon == max(seen)  # the progress bar's worst client so far
            own[client].record(release, q, 2)
            capacity[client] += 2 * release.log_bayes_capacity(13_700, 1.0)
            expected = own[client].result(1e-5)
            assert (tally["epsilon"], tally["route"]) == (expected.epsilon, expected.route)
            assert tally["log_capacity_cumulative"] == pytest.approx(capacity[client], rel=1e-12)
            assert tally["releases"] == 2 * rnd


def test_unaccountable_answers_are_kept_per_history_and_equal_a_fresh_ledgers(monkeypatch):
    # clients with one history share one computation; a different history (a client with a
    # round more) or a different round's declaration gets its own, and every kept answer is
    # what a ledger that never kept one says
    gauss = build_mechanism("gaussian", {"noise_multiplier": 1.2}).release(13_700)
    huge = build_mechanism("gaussian", {"noise_multiplier": 1e-3}).release(13_700)
    args = {"sample_rate": 0.25, "batch_size": 16, "dim": 13_700}
    ledger = PrivacyLedger(1e-5, "pld")
    computed = []
    original = PrivacyLedger._unaccountable

    def counting(self, *a, **k):
        computed.append(a[0])
        return original(self, *a, **k)

    monkeypatch.setattr(PrivacyLedger, "_unaccountable", counting)
    ledger.fold(1, 0, gauss, steps=2, **args)
    answers = [ledger.unaccountable(c, gauss, steps=2, **args) for c in (1, 2, 3)]
    assert computed == [1] and answers == [None] * 3
    assert ledger.unaccountable(0, gauss, steps=2, **args) is None  # history of one round
    assert ledger.unaccountable(4, huge, steps=100_000, **args) is not None
    assert computed == [1, 0, 4]
    fresh = PrivacyLedger(1e-5, "pld")
    assert fresh.unaccountable(4, huge, steps=100_000, **args) == ledger.unaccountable(
        5, huge, steps=100_000, **args)
    assert computed == [1, 0, 4, 4]  # the fresh ledger's own computation; client 5 was kept
