"""A Flower :class:`~flwr.serverapp.Grid` served in this process: the real ServerApp body
(:func:`strategies.server_run.run_federation`) without Ray or a SuperLink.

:class:`LocalGrid` hands each message to a ClientApp in this process, in node order, and
turns an exception into an error reply the way Flower's simulation engine does
(``vce_api.worker``). It runs a federation in seconds: the in-process route of the benchmarks
(``benchmarks/scaling.py``, ``benchmarks/update_dtype.py``) and the grid of the tests, which
add their injected faults and crashes around it (``tests/reliability_support.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from fedpriv.seeding import REPRODUCIBLE_NOISE_KEY

__all__ = ["LocalGrid"]


class LocalGrid(Grid):
    """Serve every message with ``client_app`` in this process.

    Sets Flower's process-wide task identity (a private API, as Flower's own unit tests do)
    so that messages can be built outside a runtime.

    Parameters
    ----------
    client_app
        The ClientApp every node runs (``clients.client_app.app``, or one behind mods).
    num_nodes
        Number of nodes; node ``1000 + p`` holds partition ``p`` of ``num_nodes``.
    reproducible_noise
        Whether the nodes opt in to the run seed's stream for their batches and noise
        (:data:`fedpriv.seeding.REPRODUCIBLE_NOISE_KEY` in their node config), as
        ``fedpriv simulate``'s clients do: the run is then reproducible. Without it each node
        keeps its noise secret, as in a deployment.
    """

    def __init__(self, client_app: ClientApp, num_nodes: int, *,
                 reproducible_noise: bool = True) -> None:
        from flwr.supercore.task_identity import TaskIdentity

        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1
        self.client_app = client_app
        self.contexts = {
            1000 + p: Context(run_id=1, node_id=1000 + p, state=RecordDict(), run_config={},
                              node_config={"partition-id": p, "num-partitions": num_nodes,
                                           REPRODUCIBLE_NOISE_KEY: reproducible_noise})
            for p in range(num_nodes)
        }  # fmt: skip
        #: what a simulation engine knows: each node's partition (strategies/identity.py)
        self.node_partitions: dict[int, int] | None = {1000 + p: p for p in range(num_nodes)}
        self._run = None

    def set_run(self, run) -> None:  # noqa: ANN001 - Flower's run record
        """Keep Flower's run record (``Grid`` interface)."""
        self._run = run

    @property
    def run(self):  # noqa: ANN201 - Flower's run record
        """The run record :meth:`set_run` kept (``Grid`` interface)."""
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int,
                       group_id: str, ttl: float | None = None) -> Message:
        """A message to ``dst_node_id`` (``Grid`` interface; ``ttl`` is not enforced here)."""
        return Message(content, dst_node_id=dst_node_id, message_type=message_type,
                       group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """Every node's id, in partition order."""
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Not served: :class:`LocalGrid` answers in :meth:`send_and_receive`."""
        raise NotImplementedError("LocalGrid answers in send_and_receive")

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Not served: :class:`LocalGrid` answers in :meth:`send_and_receive`."""
        raise NotImplementedError("LocalGrid answers in send_and_receive")

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: float | None = None) -> list[Message]:
        """Each message's reply from its node's ClientApp, in node order (no timeout: every
        node answers before this returns); an exception becomes an error reply."""
        ordered = sorted(messages, key=lambda m: m.metadata.dst_node_id)
        return [self._serve(i, m) for i, m in enumerate(ordered)]

    def _serve(self, i: int, msg: Message) -> Message:
        msg.metadata.__dict__["_message_id"] = f"local-{i}-{msg.metadata.dst_node_id}"
        try:
            return self.client_app(msg, self.contexts[msg.metadata.dst_node_id])
        except Exception as exc:  # noqa: BLE001 - Flower's simulation does the same
            reason = f"{type(exc)}:<'{exc}'>"
            return Message(Error(code=0, reason=reason), reply_to=msg)
