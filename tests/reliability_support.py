"""Test helpers for the reliability tests: injected client faults and an in-process Grid.

* :func:`mixed_client_app` — fedpriv's ClientApp on some nodes, Flower's quickstart ClientApp
  (:mod:`stock_client`) on others, each train reply edited as a test asks.
* :func:`faulty_client_app` — fedpriv's own ClientApp functions (``clients.client_app.train``
  and ``evaluate``) behind a Flower client mod that, for chosen (partition id, round) pairs,
  raises or corrupts the reply. Production code is untouched; the same object runs in Ray
  actors (it pickles by reference: ``tests/`` is on the actors' ``PYTHONPATH``).
* :class:`LocalGrid` — the in-process Grid of the application
  (:class:`workflows.local_grid.LocalGrid`: :func:`strategies.server_run.run_federation` in
  seconds, without Ray) with a crash added: ``stop_at`` raises :class:`Killed` when a round's
  messages are sent.
* :func:`run_on_ray` — the same federation on Flower's simulation engine (Ray).
* :func:`assert_same_outcome` — a resumed ``fedpriv simulate`` ended where an uninterrupted
  run of the same seed ended.
* :func:`verdict_leaf` — one named check in a client-round's verdict tree;
  :func:`committed_margin` — what its committed-noise check measured.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MessageType
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from fedpriv.audit import AuditStore
from workflows.local_grid import LocalGrid as BaseGrid

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.toml"
#: Fault kinds the mod injects.
FAULTS = ("raise", "nan", "inf", "shape", "weight-nan", "no-meta")


class Killed(Exception):
    """Raised by :class:`LocalGrid` to stop a run mid-round."""


def _corrupt(reply: Message, kind: str) -> None:
    content = reply.content
    arrays = {k: v.numpy().copy() for k, v in content["arrays"].items()}
    first, last = next(iter(arrays)), list(arrays)[-1]
    if kind == "nan":
        arrays[first].flat[0] = np.nan
    elif kind == "inf":
        arrays[last].flat[-1] = np.inf
    elif kind == "shape":
        arrays[first] = arrays[first][:-1]
    elif kind == "weight-nan":
        content["metrics"]["num-examples"] = float("nan")
    elif kind == "no-meta":
        del content["meta"]
    content["arrays"] = ArrayRecord({k: Array(v) for k, v in arrays.items()})


def fault_mod(plan: Mapping[tuple[int, int], str]):  # noqa: ANN201 - a Flower mod
    """A client mod injecting ``plan[(partition id, round)]`` (one of :data:`FAULTS`)."""

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, context)
        key = (int(context.node_config["partition-id"]), int(msg.content["config"]["server-round"]))
        kind = plan.get(key)
        if kind == "raise":
            raise RuntimeError(f"injected fault: client {key[0]} round {key[1]}")
        reply = call_next(msg, context)
        if kind is not None:
            _corrupt(reply, kind)
        return reply

    return mod


def client_app_with(mod) -> ClientApp:  # noqa: ANN001 - a Flower mod
    """fedpriv's ClientApp functions behind ``mod``: how the tests make a client misbehave."""
    from clients.client_app import evaluate, train

    app = ClientApp(mods=[mod])
    app.train()(train)
    app.evaluate()(evaluate)
    return app


def mixed_client_app(
    stock: Collection[int], change: Callable[[int, Message], None] | None = None,
) -> ClientApp:
    """fedpriv's ClientApp on every node but the partitions in ``stock``, which run Flower's
    quickstart ClientApp (:mod:`stock_client`: no report); ``change(partition id, reply)``
    edits every train reply, as a hostile client would."""
    import stock_client

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, context)
        pid = int(context.node_config["partition-id"])
        reply = stock_client.train(msg, context) if pid in stock else call_next(msg, context)
        if change is not None:
            change(pid, reply)
        return reply

    return client_app_with(mod)


def faulty_client_app(plan: Mapping[tuple[int, int], str]) -> ClientApp:
    """fedpriv's ClientApp functions behind :func:`fault_mod`."""
    return client_app_with(fault_mod(dict(plan)))


class LocalGrid(BaseGrid):
    """:class:`workflows.local_grid.LocalGrid` that can crash: ``stop_at`` raises
    :class:`Killed` when that round's messages are sent (set it to None to restart)."""

    def __init__(self, client_app: ClientApp, num_nodes: int, stop_at: int | None = None):
        super().__init__(client_app, num_nodes)
        self.stop_at = stop_at

    def send_and_receive(self, messages, *, timeout=None) -> list[Message]:  # noqa: ANN001
        messages = list(messages)
        rounds = {int(m.content["config"]["server-round"]) for m in messages}
        if self.stop_at in rounds:
            raise Killed(f"stopped at round {self.stop_at}")
        return super().send_and_receive(messages, timeout=timeout)


def run_on_ray(cfg, client_app: ClientApp, num_supernodes: int, run_dir: Path) -> dict:  # noqa: ANN001
    """:func:`strategies.server_run.run_federation` behind a ServerApp on Flower's simulation
    engine (Ray) with ``client_app`` on ``num_supernodes`` nodes; the run's result."""
    import warnings

    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from strategies.server_run import run_federation
    from workflows.ray_session import ray_session
    from workflows.simulation import SIMULATED_CLIENTS_ENV, _backend_config

    result: dict = {}
    server = ServerApp()

    @server.main()
    def _main(grid: Grid, context: Context) -> None:
        result.update(run_federation(grid, cfg, run_dir))

    backend = _backend_config(cfg)
    # fedpriv simulate's Ray: its clients draw from the run seed's stream (reproducible)
    with ray_session(backend["init_args"], SIMULATED_CLIENTS_ENV), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(server_app=server, client_app=client_app, num_supernodes=num_supernodes,
                       backend_name="ray", backend_config=backend)
    return result


def assert_same_outcome(got: dict, want: dict, got_dir: Path, want_dir: Path, rounds: int) -> None:
    """The reports ``got`` and ``want`` (``fedpriv simulate --json``) of the runs in
    ``got_dir`` and ``want_dir``: the same accuracy per round (``rounds`` of them), the same ε
    per client, bit-for-bit the same final aggregate and the same tallies."""
    assert got["accuracy"] == want["accuracy"] and len(got["accuracy"]) == rounds
    assert [c["epsilon"] for c in got["clients"]] == [c["epsilon"] for c in want["clients"]]
    with AuditStore.open(got_dir, readonly=True) as a, \
            AuditStore.open(want_dir, readonly=True) as b:
        for x, y in zip(a.load_aggregate(rounds).values(), b.load_aggregate(rounds).values(),
                        strict=True):
            np.testing.assert_array_equal(x, y)
        sql = "SELECT * FROM tallies ORDER BY round, client_id"
        assert a.query(sql) == b.query(sql)


def verdict_leaf(verdict: dict, test: str) -> dict | None:
    """The first check named ``test`` in a client-round's verdict tree (depth first)."""
    if verdict.get("test") == test:
        return verdict
    return next((found for part in verdict.get("parts", [])
                 if (found := verdict_leaf(part, test))), None)


_WITHIN = re.compile(r"\(([0-9.e+-]+) ≤ ([0-9.e+-]+) noise stds")


def committed_margin(verdict: dict) -> tuple[float, float] | None:
    """``(remainder, bound)`` in noise stds of a client-round's passed committed-noise check
    (``remainder_in_noise``, ``bound_in_noise`` of fedpriv/verification/committed.py); None
    without a passed one. Read from the check's reason, as committed.py writes it (to 3
    significant digits): the stored verdict keeps each part's test, status, p-value and
    reason, not its statistic (strategies/reply_verdicts.py, ``verdict_summary``)."""
    leaf = verdict_leaf(verdict, "committed-noise")
    if leaf is None or leaf["status"] != "consistent":
        return None
    found = _WITHIN.search(leaf["reason"])
    assert found, leaf["reason"]
    return float(found[1]), float(found[2])
