"""Faulty clients never stop a run, never reach aggregation, and are all on record.

Faults are injected by a Flower client mod around fedpriv's own ClientApp functions
(:mod:`reliability_support`). The fast test runs the real ServerApp body
(:func:`strategies.server_run.run_federation`) on an in-process Grid; the slow one runs it on
Flower's simulation engine (Ray) to check what Flower does with a ClientApp that raises.
"""

from __future__ import annotations

import numpy as np
import pytest
from reliability_support import QUICKSTART, LocalGrid, faulty_client_app, run_on_ray

from fedpriv.audit import AuditStore
from strategies.server_run import run_federation
from workflows.config import load_config

# A reply stripped of its report is refused here (audit.undeclared = "refuse"); accepted as a
# stock client's undeclared update by default (tests/test_stock_clients.py). Not about attacks:
# audit.attacks=[] (the default attacks one client a round).
SMALL = ["rounds=3", "data.num_clients=5", "train.local_steps=2", "train.batch_size=16",
         "train.lr=1.0", "audit.undeclared=refuse", "audit.attacks=[]"]  # fmt: skip
# (partition id, round) -> fault. Client 1 fails before it ever replied, so the server cannot
# name it (only its node); client 4 fails after a good round 1, so it can.
PLAN = {
    (1, 1): "raise", (2, 1): "nan",
    (0, 2): "inf", (2, 2): "weight-nan", (3, 2): "shape", (4, 2): "raise",
    **{(c, 3): "raise" for c in (0, 1, 2)}, (3, 3): "no-meta", (4, 3): "shape",
}  # fmt: skip
KINDS = {"raise": "exception", "nan": "non-finite", "inf": "non-finite",
         "weight-nan": "malformed", "shape": "shape", "no-meta": "undeclared"}  # fmt: skip


def _fedavg(store: AuditStore, rnd: int) -> list[np.ndarray]:
    """θ_r + Σ_i w_i Δ_i / Σ_i w_i over the accepted (status ok) updates of round ``rnd``;
    θ_r when there are none."""
    theta = list(store.load_global(rnd).values())
    ok = [u for u in store.iter_updates(rounds=[rnd]) if u.status == "ok"]
    if not ok:
        return theta
    weights = np.array([u.report.local_examples for u in ok], dtype=np.float64)
    deltas = [list(store.load_update(u.update_id).values()) for u in ok]
    pairs = list(zip(weights, deltas, strict=True))
    return [
        t + sum(w * d[k].astype(np.float64) for w, d in pairs) / weights.sum()
        for k, t in enumerate(theta)
    ]


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    cfg = load_config(QUICKSTART, SMALL)
    run_dir = tmp_path_factory.mktemp("faults") / "run"
    report = run_federation(LocalGrid(faulty_client_app(PLAN), 5), cfg, run_dir)
    return cfg, run_dir, report


def test_the_run_completes_and_lists_every_fault(faulty_run):
    _, _, report = faulty_run
    assert report["status"] == "completed" and report["rounds"] == 3
    got = sorted((f["round"], f["node_id"], f["kind"]) for f in report["failures"])
    assert got == sorted((r, str(1000 + c), KINDS[k]) for (c, r), k in PLAN.items())
    named = {(f["round"], f["client_id"]) for f in report["failures"]}
    assert (1, None) in named  # client 1 raised before the server ever heard from it
    assert named - {(1, None)} == {(r, c) for c, r in PLAN} - {(1, 1)}
    message = next(f["message"] for f in report["failures"] if f["kind"] == "exception")
    assert "injected fault" in message


def test_store_keeps_a_row_for_every_named_failure(faulty_run):
    _, run_dir, report = faulty_run
    with AuditStore.open(run_dir, readonly=True) as store:
        rows = {(u.round, u.client_id): u for u in store.iter_updates()}
    for (client, rnd), kind in PLAN.items():
        if (client, rnd) == (1, 1):
            assert (rnd, client) not in rows
            continue
        row = rows[(rnd, client)]
        assert row.status == ("failed" if kind == "raise" else "rejected") and row.path is None
    healthy = {(r, c) for (r, c), u in rows.items() if u.status == "ok"}
    assert healthy == {(r, c) for r in (1, 2, 3) for c in range(5)} - {(r, c) for c, r in PLAN}
    participated = {c["client_id"]: c["rounds_participated"] for c in report["clients"]}
    assert participated == {c: sum((r, c) in healthy for r in (1, 2, 3)) for c in range(5)}


def test_aggregate_is_fedavg_over_the_healthy_clients_only(faulty_run):
    _, run_dir, _ = faulty_run
    with AuditStore.open(run_dir, readonly=True) as store:
        for rnd in (1, 2, 3):
            aggregate = list(store.load_aggregate(rnd).values())
            assert all(np.isfinite(a).all() for a in aggregate)
            for got, want in zip(aggregate, _fedavg(store, rnd), strict=True):
                np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
            if rnd < 3:  # the next round starts from this aggregate, bit for bit
                for a, b in zip(aggregate, store.load_global(rnd + 1).values(), strict=True):
                    np.testing.assert_array_equal(a, b)
        # round 3 had no healthy reply: θ stays as it was, bit for bit
        for a, b in zip(store.load_aggregate(3).values(), store.load_global(3).values(),
                        strict=True):
            np.testing.assert_array_equal(a, b)


def test_tallies_count_only_accepted_releases(faulty_run):
    cfg, run_dir, report = faulty_run
    steps = cfg.train.local_steps
    for client in report["clients"]:
        assert (client["releases"] or 0) == steps * client["rounds_participated"]
    assert [c["releases"] for c in report["clients"] if c["client_id"] == 2] == [None]


@pytest.mark.slow
def test_flower_simulation_turns_a_raising_clientapp_into_an_error_reply(tmp_path):
    """On Ray, an exception in the ClientApp reaches the server as an error reply (Flower's
    ``ClientAppException``); the round goes on with the others."""
    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=3", "train.local_steps=2",
                                   "audit.attacks=[]"])
    plan = {(0, 1): "raise", (1, 2): "nan", (2, 2): "shape"}
    result = run_on_ray(cfg, faulty_client_app(plan), 3, tmp_path / "run")
    assert result["status"] == "completed" and result["rounds"] == 2
    failures = {(f["round"], f["kind"]): f for f in result["failures"]}
    assert set(failures) == {(1, "exception"), (2, "non-finite"), (2, "shape")}
    # Ray's reply holds the remote traceback, coloured; the store keeps the exception's line
    assert failures[1, "exception"]["message"] == "RuntimeError: injected fault: client 0 round 1"
    assert failures[2, "non-finite"]["client_id"] == 1
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        for rnd in (1, 2):
            for got, want in zip(store.load_aggregate(rnd).values(), _fedavg(store, rnd),
                                 strict=True):
                np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
