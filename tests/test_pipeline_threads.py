"""The server checks a round's replies with one BLAS thread (strategies/pipeline.py; the
verification stage is strategies/stages/verify.py): a
threaded BLAS call on a reply's ~10⁴ floats costs milliseconds of thread hand-offs on cores the
clients keep busy. The limit holds while replies are checked and is lifted after."""

from __future__ import annotations

from pathlib import Path

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import strategies.stages.verify as pipeline


def _blas_threads() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_replies_are_checked_with_one_blas_thread(tmp_path: Path, monkeypatch):
    from reliability_support import QUICKSTART, LocalGrid

    from clients.client_app import app
    from strategies.server_run import run_federation
    from workflows.config import load_config

    if not _blas_threads():
        pytest.skip("no BLAS library reports its threads to threadpoolctl")
    seen: list[list[int]] = []
    verify = pipeline.verified_together  # the replies sharing a declaration, together

    def recording(report, recovered, alpha):  # noqa: ANN001, ANN202
        seen.extend(_blas_threads() for _ in recovered)  # one entry per reply checked
        return verify(report, recovered, alpha)

    monkeypatch.setattr(pipeline, "verified_together", recording)
    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=2",
                                   "audit.attacks=[]"])  # the default attacks a client a round
    with threadpool_limits(limits=2, user_api="blas"):  # a threaded BLAS, as by default
        assert set(_blas_threads()) == {2}
        run_federation(LocalGrid(app, 2), cfg, tmp_path / "run")
        assert set(_blas_threads()) == {2}  # lifted after the round's checks
    assert len(seen) == 2 and all(set(threads) == {1} for threads in seen)
