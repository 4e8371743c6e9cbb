"""Test helpers for the reliability tests: injected client faults and an in-process Grid.

* :func:`mixed_client_app` — fedpriv's ClientApp on some nodes, Flower's quickstart ClientApp
  (:mod:`stock_client`) on others, each train reply edited as a test asks.
* :func:`faulty_client_app` — fedpriv's own ClientApp functions (``clients.client_app.train``
  and ``evaluate``) behind a Flower client mod that, for chosen (partition id, round) pairs,
  raises or corrupts the reply. Production code is untouched; the same object runs in Ray
  actors (it pickles by reference: ``tests/`` is on the actors' ``PYTHONPATH``).
* :class:`LocalGrid` — a Flower :class:`~flwr.serverapp.Grid` that hands each message to a
  ClientApp in this process, in node order, and turns an exception into an error reply the
  way Flower's simulation engine does (``vce_api.worker``). It runs
  :func:`strategies.server_run.run_federation` in seconds, without Ray; ``stop_at`` raises
  :class:`Killed` when a round's train messages are sent, as a crash would.
* :func:`run_on_ray` — the same federation on Flower's simulation engine (Ray).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Error, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

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


class LocalGrid(Grid):
    """Serve every message with ``client_app`` in this process (node ids ``1000 + partition``).

    Sets Flower's process-wide task identity (a private API, as Flower's own unit tests do)
    so that messages can be built outside a runtime.
    """

    def __init__(self, client_app: ClientApp, num_nodes: int, stop_at: int | None = None):
        from flwr.supercore.task_identity import TaskIdentity

        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1
        self.client_app = client_app
        self.stop_at = stop_at
        self.contexts = {
            1000 + p: Context(run_id=1, node_id=1000 + p, state=RecordDict(), run_config={},
                              node_config={"partition-id": p, "num-partitions": num_nodes})
            for p in range(num_nodes)
        }  # fmt: skip
        #: what a simulation engine knows: each node's partition (strategies/identity.py)
        self.node_partitions = {1000 + p: p for p in range(num_nodes)}
        self._run = None

    def set_run(self, run) -> None:  # noqa: ANN001
        self._run = run

    @property
    def run(self):  # noqa: ANN201
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # noqa: ANN001, ANN201
        return Message(content, dst_node_id=dst_node_id, message_type=message_type,
                       group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages):  # noqa: ANN001, ANN201
        raise NotImplementedError("LocalGrid answers in send_and_receive")

    def pull_messages(self, message_ids):  # noqa: ANN001, ANN201
        raise NotImplementedError("LocalGrid answers in send_and_receive")

    def send_and_receive(self, messages, *, timeout=None) -> list[Message]:  # noqa: ANN001
        messages = sorted(messages, key=lambda m: m.metadata.dst_node_id)
        rounds = {int(m.content["config"]["server-round"]) for m in messages}
        if self.stop_at in rounds:
            raise Killed(f"stopped at round {self.stop_at}")
        return [self._serve(i, m) for i, m in enumerate(messages)]

    def _serve(self, i: int, msg: Message) -> Message:
        msg.metadata.__dict__["_message_id"] = f"local-{i}-{msg.metadata.dst_node_id}"
        try:
            return self.client_app(msg, self.contexts[msg.metadata.dst_node_id])
        except Exception as exc:  # noqa: BLE001 - Flower's simulation does the same
            reason = f"{type(exc)}:<'{exc}'>"
            return Message(Error(code=0, reason=reason), reply_to=msg)


def run_on_ray(cfg, client_app: ClientApp, num_supernodes: int, run_dir: Path) -> dict:  # noqa: ANN001
    """:func:`strategies.server_run.run_federation` behind a ServerApp on Flower's simulation
    engine (Ray) with ``client_app`` on ``num_supernodes`` nodes; the run's result."""
    import warnings

    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from strategies.server_run import run_federation
    from workflows.simulation import _backend_config

    result: dict = {}
    server = ServerApp()

    @server.main()
    def _main(grid: Grid, context: Context) -> None:
        result.update(run_federation(grid, cfg, run_dir))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(server_app=server, client_app=client_app, num_supernodes=num_supernodes,
                       backend_name="ray", backend_config=_backend_config(cfg))
    return result
