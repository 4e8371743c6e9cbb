"""The run freezes the setup heap out of the collector's scans while its rounds run, and gives
it back when they end — also when the run dies mid-round (``strategies.server_run``)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, Killed, LocalGrid

from strategies.server_run import run_federation
from workflows.config import load_config

SEEN: list[int] = []


def _count_frozen(msg, context, call_next):  # noqa: ANN001, ANN202 - a Flower client mod
    SEEN.append(gc.get_freeze_count())
    return call_next(msg, context)


def _client_app() -> ClientApp:
    from clients.client_app import evaluate, train

    app = ClientApp(mods=[_count_frozen])
    app.train()(train)
    app.evaluate()(evaluate)
    return app


@pytest.mark.parametrize("stop_at", [None, 2], ids=["completed", "killed in round 2"])
def test_the_setup_heap_is_frozen_during_the_rounds_only(stop_at: int | None,
                                                         tmp_path: Path) -> None:
    assert gc.get_freeze_count() == 0
    SEEN.clear()
    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=2", "audit.attacks=[]"])
    grid = LocalGrid(_client_app(), cfg.data.num_clients, stop_at=stop_at)
    try:
        if stop_at is None:
            run_federation(grid, cfg, tmp_path / "run")
        else:
            with pytest.raises(Killed):
                run_federation(grid, cfg, tmp_path / "run")
    finally:
        frozen_after = gc.get_freeze_count()
        gc.unfreeze()
    assert SEEN and min(SEEN) > 10_000  # the data set, the model, the modules: frozen
    assert frozen_after == 0  # given back, whatever ended the run
