"""No unverified size steers a run (issue 42, item 5): by default an aggregation weight the server
cannot check counts at most the round's median verified size (of its claimed sizes when none is
verified), and the share of each round's aggregate weight that came from unverified sizes is in
the store and in ``report.json``.

Before: a stock client claiming n = 10⁹ weighed 10 × the round's median (``strategy.weight_cap =
10``, a median over claims and verified sizes alike): 52.6 % of the aggregate beside nine honest
stock clients, two such clients 71.4 %; and nothing recorded how much of a round followed
unverified sizes.
"""

from __future__ import annotations

import logging
import statistics
from pathlib import Path

import pytest
from flwr.app import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability_support import QUICKSTART, LocalGrid, mixed_client_app

from fedpriv.audit import AuditStore
from strategies.config import StrategyConfig
from strategies.identity import aggregation_weights, partition_sizes, unverified_share
from strategies.server_run import dataset_of, run_federation
from workflows.config import load_config

CLAIM = 10**9
NO_ATTACKS = "audit.attacks=[]"  # not about attacks: the default attacks one client a round
DEFAULT = (StrategyConfig().weighting, StrategyConfig().weight_cap)

sizes = st.integers(1, 2**63 - 1)
rounds = st.lists(st.tuples(sizes, st.one_of(st.none(), sizes)), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(rounds)
def test_no_share_exceeds_its_verified_size_or_the_median(replies) -> None:  # noqa: ANN001
    """Under the default policy a verified reply weighs its verified size and an unverified one
    at most the round's lower median verified size (of the claims when none is verified): its
    share of the aggregate is at most what that weight gives it."""
    declared, known = [d for d, _ in replies], [k for _, k in replies]
    weights = aggregation_weights(declared, known, *DEFAULT)
    verified = [k for k in known if k is not None]
    median = statistics.median_low(verified or declared)
    total = sum(weights)
    for weight, claim, size in zip(weights, declared, known, strict=True):
        most = float(size) if size is not None else float(median)
        assert weight == (most if size is not None else min(float(claim), most))
        assert weight / total <= most / total
    share = unverified_share(weights, known)
    assert share == pytest.approx(sum(w for w, k in zip(weights, known, strict=True)
                                      if k is None) / total)


def test_a_verified_median_caps_claims_that_outnumber_it() -> None:
    """Two claims of 10⁹ beside one verified size of 100: the lower median of all sizes would be
    10⁹; the verified median is 100."""
    assert aggregation_weights([100, CLAIM, CLAIM], [100, None, None], *DEFAULT) == [100.0] * 3
    assert unverified_share([100.0] * 3, [100, None, None]) == pytest.approx(2 / 3)
    assert unverified_share([], []) is None


def _claims(liars: set[int]):  # noqa: ANN202
    def change(pid: int, reply: Message) -> None:
        if pid in liars:
            reply.content["metrics"]["num-examples"] = CLAIM
    return change


def test_a_stock_claim_among_verified_clients_weighs_the_verified_median(tmp_path: Path) -> None:
    """Engine-bound fedpriv clients (sizes the server computes) and one stock client claiming
    10⁹: the stock client weighs the median verified size, and the round's unverified share,
    recorded in the store and the report, is that weight over the round's."""
    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=5", "train.local_steps=1",
                                   "train.batch_size=8", NO_ATTACKS])
    app = mixed_client_app({4}, _claims({4}))
    report = run_federation(LocalGrid(app, 5), cfg, tmp_path / "run")
    assert report["status"] == "completed" and report["failures"] == []
    verified = partition_sizes(cfg, dataset_of(cfg))[:4]
    median = statistics.median_low(verified)
    expected = median / (sum(verified) + median)
    assert expected < 0.25  # one client of five, at most a median one
    assert report["unverified_share"] == [pytest.approx(expected)] * 2
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        rows = store.query("SELECT metrics_json FROM rounds ORDER BY round")
    assert all('"unverified_share"' in r["metrics_json"] for r in rows)


@pytest.mark.parametrize("liars", [{0}, {0, 1}])
def test_stock_claims_without_a_binding_weigh_the_claimed_median(
    tmp_path: Path, caplog, liars: set[int],  # noqa: ANN001
) -> None:
    """Ten stock clients of 64 records each, no binding (a deployment without a registry):
    one or two claiming 10⁹ weigh 64 each — a tenth of the aggregate each, not 52.6 % / 71.4 %."""
    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=10", "train.lr=0.5",
                                   NO_ATTACKS])
    grid = LocalGrid(mixed_client_app(set(range(10)), _claims(liars)), 10)
    grid.node_partitions = None  # a deployment's grid: the server knows no partition
    with caplog.at_level(logging.WARNING, logger="strategies.identity"):
        report = run_federation(grid, cfg, tmp_path / "run")
    assert report["status"] == "completed" and report["unverified_share"] == [1.0]
    capped = [r.getMessage() for r in caplog.records if "aggregation weight" in r.getMessage()]
    assert len(capped) == len(liars), capped
    assert all(m.split("aggregation weight ")[1].startswith("64 ") for m in capped), capped
