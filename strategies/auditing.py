"""Auditing around any Flower strategy: every reply is shown to the auditor first.

:class:`AuditingStrategy` wraps an inner Flower strategy as Flower's own DP wrappers do
(``DifferentialPrivacyServerSideFixedClipping(strategy, ...)``): it remembers the parameters θ
the inner strategy broadcasts each round, hands every reply to the
:class:`~strategies.pipeline.AuditPipeline` — which records it and says whether it is fit to
aggregate — and passes only the accepted replies, in client order, to the inner strategy's
aggregation. A rejected, failed, declined or non-finite reply never reaches aggregation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.exception import InconsistentMessageReplies
from flwr.serverapp.strategy import Result, Strategy

from fedpriv.budget import RELEASES_KEY, encode_releases
from fedpriv.errors import InputError
from strategies.pipeline import AuditPipeline
from strategies.replies import conform

__all__ = ["AuditingStrategy"]

_POLL_SECONDS = 0.5
log = logging.getLogger(__name__)


class AuditingStrategy(Strategy):
    """Wrap ``inner`` so that ``auditor`` sees every broadcast and every reply.

    Parameters
    ----------
    inner
        The Flower strategy that samples clients and aggregates (any of
        :data:`strategies.aggregation.STRATEGIES`).
    auditor
        Receives ``begin_round``, ``accepted`` and ``end_round`` calls.
    num_nodes
        Nodes to wait for before round 1 (``data.num_clients``).
    join_timeout
        Seconds to wait for them (``strategy.join_timeout``); then InputError naming the key.
    round_offset
        Rounds already completed by an earlier run (``--resume``): Flower counts from 1, the
        audit store and the clients' seeds use ``offset + round``.
    budgets
        Whether clients have ε budgets (``mechanism.epsilon_budget``): then every train message
        carries the releases the auditor accounted per client, a floor for a client that lost
        its own count (``clients/budget.py``). Clients that declined for their budget are never
        sent a train message again, whatever the inner strategy samples.
    """

    def __init__(
        self, inner: Strategy, auditor: AuditPipeline, *, num_nodes: int, join_timeout: float,
        round_offset: int = 0, budgets: bool = False,
    ) -> None:
        self.inner = inner
        self.budgets = budgets
        self.auditor = auditor
        self.num_nodes = num_nodes
        self.join_timeout = join_timeout
        self.round_offset = round_offset
        self._broadcast: list = []
        self._names: list[str] = []
        self._sent: list[Message] = []
        self._destinations: dict[str, int] | None = None  # message id -> node (_sender)

    def summary(self) -> None:
        self.inner.summary()

    def start(
        self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
        timeout: float = 3600, train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Wait for every node, bind nodes to clients (:meth:`AuditPipeline.bind`), then run
        Flower's loop with this wrapper as the strategy."""
        self._wait_for_nodes(grid)
        self.auditor.bind(grid)
        return super().start(grid, initial_arrays, num_rounds, timeout, train_config,
                             evaluate_config, evaluate_fn)

    def _wait_for_nodes(self, grid: Grid) -> None:
        deadline = time.monotonic() + self.join_timeout
        while len(list(grid.get_node_ids())) < self.num_nodes:
            if time.monotonic() > deadline:
                joined = len(list(grid.get_node_ids()))
                raise InputError("strategy.join_timeout", self.join_timeout,
                                 f"enough seconds for all {self.num_nodes} nodes to join "
                                 f"(data.num_clients; {joined} joined)")
            time.sleep(_POLL_SECONDS)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Remember θ and open the round, then let the inner strategy sample; the round number
        the clients see is absolute."""
        absolute = server_round + self.round_offset
        self._broadcast, self._names = arrays.to_numpy_ndarrays(), list(arrays.keys())
        self.auditor.begin_round(absolute, self._broadcast)
        sampled = list(self.inner.configure_train(server_round, arrays, config, grid))
        self.auditor.sampled(absolute, len(sampled))
        messages = [m for m in sampled if self.auditor.selectable(m.metadata.dst_node_id)]
        if len(messages) < len(sampled):
            log.info("round %d: %d node(s) not sent a train message: their clients' epsilon "
                     "budgets are spent", absolute, len(sampled) - len(messages))
        releases = encode_releases(self.auditor.releases()) if self.budgets else None
        for msg in messages:
            msg.content["config"]["server-round"] = absolute
            if releases is not None:
                msg.content["config"][RELEASES_KEY] = releases
        self._sent = messages
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Audit every reply, then aggregate the accepted ones with the inner strategy. A round
        the inner strategy cannot aggregate (e.g. Krum with too few replies) keeps the old θ
        and is recorded."""
        absolute = server_round + self.round_offset
        self._destinations = None  # this round's sent messages, by id: built on demand
        replies = [(self._sender(m), m) for m in replies]
        self._record_silent(absolute, [node for node, _ in replies])
        accepted = self.auditor.accepted(absolute, replies, self._broadcast, self._names)
        if not accepted:
            return None, None
        try:
            arrays, metrics = self.inner.aggregate_train(server_round, conform(accepted))
        except (InconsistentMessageReplies, ValueError) as exc:
            self.auditor.record_failure(absolute, "malformed",
                                        f"{type(self.inner).__name__} could not aggregate: {exc}")
            return None, None
        return _as_broadcast(arrays, self._broadcast), metrics

    def _sender(self, reply: Message) -> int:
        """The node a reply is about: its source, except for an error reply the SuperLink made
        for a node it lost ("node unavailable"), which comes from the SuperLink's own id — that
        one is about the node the message was sent to."""
        if reply.has_error():
            if self._destinations is None:  # once per round, not once per error reply
                self._destinations = {m.metadata.message_id: m.metadata.dst_node_id
                                      for m in self._sent}
            return self._destinations.get(reply.metadata.reply_to_message_id,
                                          reply.metadata.src_node_id)
        return reply.metadata.src_node_id

    def _record_silent(self, rnd: int, answered_nodes: list[int]) -> None:
        """Nodes sent a message that did not answer within ``strategy.round_timeout``."""
        answered = set(answered_nodes)
        for msg in self._sent:
            node = msg.metadata.dst_node_id
            if node not in answered:
                self.auditor.record_silence(rnd, node)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.inner.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        return self.inner.aggregate_evaluate(server_round, replies)


def _as_broadcast(arrays: ArrayRecord | None, broadcast: list[np.ndarray]) -> ArrayRecord | None:
    """The inner strategy's new θ in the dtypes of the θ it was computed from: the model keeps
    its own precision, whatever the server's optimiser computes in. Flower's FedAdam (1.42)
    returns float64 arrays for a float32 model (its bias-corrected step size is a NumPy
    float64 scalar, which promotes); broadcast as such,
    every client's float32 update would no longer conform to θ (stage 1) and every round
    after the first would be refused."""
    if arrays is None:
        return None
    values = arrays.to_numpy_ndarrays()
    if [v.dtype for v in values] == [b.dtype for b in broadcast]:
        return arrays
    return ArrayRecord({name: Array(v.astype(b.dtype)) for name, v, b in
                        zip(arrays.keys(), values, broadcast, strict=True)})
