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


def test_a_fold_whose_local_size_was_not_verified_is_accounted_at_q_1():
    """Amplification by sampling only at a size the server verified: a round folded with
    ``size_verified=False`` is accounted at q = 1 (ε and the accountant's ledger), the claimed
    q kept in ``epsilon_declared``; the tally's ``sampling`` says why. A client-level fold is
    untouched (its release is never sampled), and a verified fold is as before."""
    gauss = build_mechanism("gaussian", {"noise_multiplier": 1.0}).release(1000)
    ledger = PrivacyLedger(1e-5)
    claimed = 32 / 10**9  # q = L/n for a claimed n = 10^9
    for rnd in (1, 2):
        tally = ledger.fold(rnd, 0, gauss, steps=5, sample_rate=claimed, batch_size=32,
                            dim=1000, verification="consistent", size_verified=False)
        at_one, at_claim = ClientAccountant(), ClientAccountant()
        at_one.record(gauss, 1.0, 5 * rnd)
        at_claim.record(gauss, claimed, 5 * rnd)
        assert tally["epsilon"] == at_one.epsilon(1e-5) > 1.0
        assert tally["epsilon_declared"] == at_claim.epsilon(1e-5) < 1e-6
        assert tally["sampling"] == (f"none (q = 1 in {rnd} of {rnd} rounds: local size not "
                                     "verified by the server)")
    verified = ledger.fold(1, 1, gauss, steps=5, sample_rate=claimed, batch_size=32,
                           dim=1000, verification="consistent")
    assert verified["epsilon"] == verified["epsilon_declared"] < 1e-6
    assert verified["sampling"] == "poisson"
    # a later verified round joins both ledgers at its own q; the claimed one keeps the claim
    mixed = ledger.fold(3, 0, gauss, steps=5, sample_rate=0.25, batch_size=32, dim=1000,
                        verification="consistent")
    assert mixed["sampling"] == ("none+poisson (q = 1 in 2 of 3 rounds: local size not "
                                 "verified by the server)")
    assert mixed["epsilon"] > tally["epsilon"] > mixed["epsilon_declared"]


def test_an_unverified_fixed_size_sample_is_every_record_of_the_batch():
    """A fixed-size batch of m from a size the server could not verify may be all the client
    holds: accounted as m of m (under add/remove the added record displaces one of them: the
    doubled release at m/(m+1)), never as one unsampled release."""
    gauss = build_mechanism("gaussian", {"noise_multiplier": 1.0}).release(1000)
    ledger = PrivacyLedger(1e-5)
    tally = ledger.fold(1, 0, gauss, steps=5, sample_rate=32 / 10**9, population=10**9,
                        batch_size=32, dim=1000, verification="consistent",
                        size_verified=False)
    every = ClientAccountant()
    every.record(gauss, 32 / 33, 5)
    unsampled = ClientAccountant()
    unsampled.record(gauss, 1.0, 5)
    doubled = ClientAccountant()
    doubled.record(gauss.doubled(), 32 / 33, 5)
    assert tally["epsilon"] == pytest.approx(doubled.epsilon(1e-5), rel=1e-9)
    assert tally["epsilon"] > unsampled.epsilon(1e-5)
    assert tally["sampling"].startswith("fixed-size (q = 1 in 1 of 1 rounds")


def test_a_client_level_fold_ignores_the_size():
    client = build_mechanism("client-gaussian", {"noise_multiplier": 1.0}).release(1000)
    ledger = PrivacyLedger(1e-5)
    a = ledger.fold(1, 0, client, steps=1, sample_rate=0.5, batch_size=1, dim=1000,
                    unit="client", size_verified=False)
    b = ledger.fold(1, 1, client, steps=1, sample_rate=0.5, batch_size=1, dim=1000,
                    unit="client")
    assert a == b


@pytest.mark.parametrize("size_verified", [True, False])
@pytest.mark.parametrize("population", [None, 10**9])
def test_the_pre_check_asks_the_accountant_about_what_the_fold_accounts(
    monkeypatch, size_verified, population,
):
    """One rule (:func:`fedpriv.ledger.accounted_sampling`): ``unaccountable`` asks the
    accountant about exactly the events ``fold`` then records — at q = 1 for a size the server
    did not verify, at the claimed sampling for a verified one — over a second round too."""
    from fedpriv import ledger as ledger_module

    asked = []
    original = ledger_module.accountable.unaccountable

    def recording(events, *a, **k):
        asked.append(list(events))
        return original(events, *a, **k)

    monkeypatch.setattr(ledger_module.accountable, "unaccountable", recording)
    gauss = build_mechanism("gaussian", {"noise_multiplier": 1.0}).release(1000)
    ledger = PrivacyLedger(1e-5)
    args = {"steps": 5, "sample_rate": 32 / 10**9, "population": population,
            "batch_size": 32, "dim": 1000, "size_verified": size_verified}
    for rnd in (1, 2):
        assert ledger.unaccountable(0, gauss, **args) is None
        ledger.fold(rnd, 0, gauss, verification="consistent", **args)
        assert asked[-1] == list(ledger.clients[0].accountant.events)
        assert {e.sample_rate == 1.0 or e.sample_rate == 32 / 33
                for e in asked[-1]} == {not size_verified}

