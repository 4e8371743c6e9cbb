"""Folds shared by the clients of one history (issue 37) give each client the tally its own,
unshared ledger gives: a mixed round — two declarations, clients that skipped rounds, an
inconsistent and an undeclared round, an unverified size, observations of their own."""

from __future__ import annotations

import math

from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import build_mechanism
from fedpriv.verification.observed import NoiseObservation

DIM = 1_000
GAUSS = build_mechanism("gaussian", {"noise_multiplier": 1.0}).release(DIM)
OTHER = build_mechanism("gaussian", {"noise_multiplier": 1.5}).release(DIM)
CLIENT = build_mechanism("client-gaussian", {"noise_multiplier": 2.0}).release(DIM)


def _round(rnd: int, client: int) -> dict | str | None:
    """Client ``client``'s fold in round ``rnd``: its arguments, ``"undeclared"`` or None
    (it sat the round out)."""
    if client in (3, 4) and rnd == 2 or client == 5 and rnd == 1:
        return None  # skipped a round
    if client == 6 and rnd == 2:
        return "undeclared"
    observation = (NoiseObservation("gaussian", 30.0 + client + 0.1 * rnd, DIM, 2, 16, 0.25)
                   if client % 4 else f"not observable: client {client}")
    args = {"release": OTHER if client >= 8 else GAUSS, "steps": 2, "sample_rate": 0.25,
            "batch_size": 16, "dim": DIM, "accuracy": 3.0, "observation": observation,
            "verification": "inconsistent" if client == 7 and rnd == 2 else "consistent",
            "verified": client != 2, "size_verified": client != 9}
    if client == 10:
        args.update(release=CLIENT, unit="client", sample_rate=1.0, steps=1)
    return args


def _fold(ledger: PrivacyLedger, rnd: int, client: int) -> dict | None:
    args = _round(rnd, client)
    if args is None:
        return None
    if args == "undeclared":
        return ledger.fold_undeclared(rnd, client)
    return ledger.fold(rnd, client, **args)


def test_a_shared_fold_is_each_clients_own():
    shared = PrivacyLedger(1e-5, "rdp")
    own = {c: PrivacyLedger(1e-5, "rdp") for c in range(12)}  # one client each: nothing shared
    for rnd in (1, 2, 3):
        shared.sampled(rnd, 10, 12)
        for ledger in own.values():
            ledger.sampled(rnd, 10, 12)
        for client in range(12):
            row = _fold(shared, rnd, client)
            assert row == _fold(own[client], rnd, client), (rnd, client)
            # a ledger shared with other clients is never changed in place by this one's fold
            assert shared.tally(client) == own[client].tally(client)
    rows = [shared.tally(c) for c in range(12)]
    assert rows[1]["epsilon_observed"]["value"] < math.inf  # observed, its own bound
    assert rows[1]["epsilon_observed"]["noise_lower"] != rows[2]["epsilon_observed"]["noise_lower"]
    assert math.isinf(rows[0]["epsilon_observed"]["value"])  # its rounds showed nothing
    assert rows[6]["guarantee"] == "undeclared" and rows[7]["guarantee"] == "unbounded"
    assert shared.clients[0] is shared.clients[1]  # one history: one ledger
    assert shared.clients[3] is shared.clients[4] is not shared.clients[0]
    assert shared.clients[3].rounds == [1, 3] and shared.clients[0].rounds == [1, 2, 3]
    assert shared.worst_epsilon == max(own[c].worst_epsilon for c in own)


def test_a_round_of_one_history_is_folded_once(monkeypatch):
    ledger = PrivacyLedger(1e-5, "rdp")
    folded = []
    original = PrivacyLedger._fold_history

    def counting(self, previous, *args):
        folded.append(args[0])
        return original(self, previous, *args)

    monkeypatch.setattr(PrivacyLedger, "_fold_history", counting)
    for rnd in (1, 2):
        for client in range(50):
            ledger.fold(rnd, client, GAUSS, steps=2, sample_rate=0.25, batch_size=16, dim=DIM,
                        verification="consistent")
    assert folded == [1, 2]
    ledger.fold(3, 0, OTHER, steps=2, sample_rate=0.25, batch_size=16, dim=DIM)
    ledger.fold(3, 1, GAUSS, steps=2, sample_rate=0.25, batch_size=16, dim=DIM)
    ledger.fold(3, 2, GAUSS, steps=2, sample_rate=0.25, batch_size=16, dim=DIM)
    assert folded == [1, 2, 3, 3]  # another release is another fold; the same is shared


def _long_round(rnd: int, client: int) -> dict | None:
    """Round ``rnd`` of client ``client`` of 50 alike for 5 rounds: then client 0 sits round 6
    out and client 1 declares another σ in it; each client states its own PAC accuracy (NaN
    for client 2), which is no part of the shared fold."""
    if client == 0 and rnd == 6:
        return None
    return {"release": OTHER if client == 1 and rnd == 6 else GAUSS, "steps": 2,
            "sample_rate": 0.25, "batch_size": 16, "dim": DIM, "verification": "consistent",
            "accuracy": math.nan if client == 2 else 3.0 + client % 3}


def test_clients_alike_for_rounds_then_diverging_get_their_own_tallies(monkeypatch):
    shared = PrivacyLedger(1e-5, "rdp")
    own = {c: PrivacyLedger(1e-5, "rdp") for c in range(50)}
    folded = []
    original = PrivacyLedger._fold_history

    def counting(self, previous, *args):
        if self is shared:
            folded.append(args[0])
        return original(self, previous, *args)

    monkeypatch.setattr(PrivacyLedger, "_fold_history", counting)
    for rnd in range(1, 8):
        for client in range(50):
            args = _long_round(rnd, client)
            if args is None:
                continue
            row, alone = shared.fold(rnd, client, **args), own[client].fold(rnd, client, **args)
            assert repr(row) == repr(alone), (rnd, client)  # repr: NaN equals NaN
        for client in range(50):
            assert repr(shared.tally(client)) == repr(own[client].tally(client)), (rnd, client)
        if rnd == 5:  # one history, whatever the accuracies: one ledger
            assert len({id(shared.clients[c]) for c in range(50)}) == 1
    assert folded == [1, 2, 3, 4, 5, 6, 6, 7, 7, 7]  # one fold per history and round
    assert shared.clients[0].rounds == [1, 2, 3, 4, 5, 7]
    assert shared.clients[3] is shared.clients[49] is not shared.clients[1]
    assert math.isnan(shared.fold(8, 2, **_long_round(8, 2))["pac_accuracy"])
