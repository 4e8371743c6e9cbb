"""Hand Flower's simulation engine its messages in one pass over the store, not one per node.

Flower 1.41–1.42's simulation engine moves the ServerApp's messages to the Ray actors with a
thread (``flwr.server.superlink.fleet.vce.vce_api.add_messages_to_queue``) that, ten times a
second, calls ``state.get_message_ins(node_id, limit=1)`` for every one of the N virtual
nodes; each call walks the whole in-memory message store (``InMemoryLinkState``), checking
every stored message's expiry and federation (``_check_stored_messages``) until it finds one
for that node. With a round's N messages stored, one pass costs N × N checks under the state's
lock, which the replies and the ServerApp's pulls wait for: at 1,000 clients about 7 CPU
seconds per pass, so a Ray round grows as N² (benchmarks/README.md, "Ray scaling").

:func:`one_pass_queue` does what that loop does — every tick, at most one undelivered message
per node, in node order, marked delivered at one time stamp, expired messages deleted —
walking the store once per tick (O(N)). :func:`indexed_message_queue` swaps it in for the
duration of a ``with`` block. It needs the in-memory state's own attributes (``lock``,
``message_ins_store``, ``_check_stored_messages``); on any other state it calls Flower's
``get_message_ins`` per node as Flower does. ``tests/test_flower_queue.py`` checks that both
hand out the same messages in the same order.

The ServerApp's side of the same engine: :func:`pace_pulls` spaces its pulls, and
:func:`stop_pulls` makes it give up waiting for replies once the run is interrupted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from queue import Queue
from typing import Any

__all__ = [
    "indexed_message_queue", "one_pass_queue", "pace_pulls", "stop_pulls", "undelivered_per_node",
]

TICK = 0.1
"""Seconds between passes, as in Flower's loop."""

PULL_SECONDS_PER_CLIENT = 1e-3
"""Seconds between the ServerApp's pulls per client of the federation (at least Flower's
0.1 s): 1 s at 1,000 clients."""

_STATE_ATTRIBUTES = ("lock", "message_ins_store", "_check_stored_messages")


def undelivered_per_node(state: Any, nodes: Mapping[int, int]) -> list[Any]:
    """The first undelivered message (in store order) of each node of ``nodes``, in the order
    of ``nodes``, each marked delivered: what ``state.get_message_ins(node, limit=1)`` for
    every node returns, in one walk of the store."""
    if not all(hasattr(state, name) for name in _STATE_ATTRIBUTES):
        return [m for node in nodes for m in state.get_message_ins(node_id=node, limit=1)]
    from flwr.supercore.date import now

    with state.lock:
        state._check_stored_messages(set(state.message_ins_store))  # deletes expired ones
        first: dict[int, Any] = {}
        for msg in state.message_ins_store.values():
            meta = msg.metadata
            if meta.delivered_at == "" and meta.dst_node_id in nodes:
                first.setdefault(meta.dst_node_id, msg)
        found = [first[node] for node in nodes if node in first]
        delivered_at = now().isoformat()
        for msg in found:
            msg.metadata.delivered_at = delivered_at
    return found


def one_pass_queue(
    state: Any, queue: Queue, nodes_mapping: Mapping[int, int], f_stop: threading.Event
) -> None:
    """Drop-in for ``vce_api.add_messages_to_queue``: every :data:`TICK` seconds until
    ``f_stop``, put :func:`undelivered_per_node` on ``queue``."""
    while not f_stop.is_set():
        for msg in undelivered_per_node(state, nodes_mapping):
            queue.put(msg)
        f_stop.wait(TICK)


@contextmanager
def indexed_message_queue() -> Iterator[None]:
    """Within the block, Flower's simulation engine uses :func:`one_pass_queue` (``run_api``
    looks the function up when it starts its thread); Flower's own is restored after."""
    from flwr.server.superlink.fleet.vce import vce_api

    original = vce_api.add_messages_to_queue
    vce_api.add_messages_to_queue = one_pass_queue
    try:
        yield
    finally:
        vce_api.add_messages_to_queue = original


def pace_pulls(grid: Any, clients: int) -> None:
    """Space the in-memory grid's pulls by :data:`PULL_SECONDS_PER_CLIENT` per client.

    ``InMemoryGrid.send_and_receive`` asks for every reply still pending each
    ``pull_interval`` seconds (0.1 s), and each ask checks every pending message
    (``get_message_res``: 8 ms CPU at 1,000 pending, benchmarks/ray_queue.py); a round's
    pulls therefore cost O(N) each over a round whose length grows with N. With the interval
    proportional to N a round pays for a bounded number of full pulls, and waits at most one
    interval (1 s at 1,000 clients) for its last reply. A grid without ``pull_interval``
    (another Flower version) is left alone.
    """
    interval = getattr(grid, "pull_interval", None)
    if isinstance(interval, int | float):
        grid.pull_interval = max(float(interval), clients * PULL_SECONDS_PER_CLIENT)


def stop_pulls(grid: Any, stop: threading.Event) -> None:
    """Make ``grid`` raise :class:`KeyboardInterrupt` from its next pull or node listing once
    ``stop`` is set.

    ``InMemoryGrid.send_and_receive`` (Flower 1.42) returns only when every reply has come or
    its ``timeout`` (``strategy.round_timeout``, 3,600 s by default) has passed, pulling every
    ``pull_interval`` seconds. When the simulation engine stops (Ctrl-C, SIGTERM: the Ray
    actors are killed), the replies never come, and the ServerApp thread — which the
    interpreter waits for before it exits — waited out the timeout. With this, it stops within
    one pull interval and the run ends as ``interrupted`` (:func:`strategies.server_run.
    run_federation`). ``get_node_ids`` is checked too: the auditing strategy polls it while
    it waits for the nodes to join.
    """
    for name in ("pull_messages", "get_node_ids"):
        method = getattr(grid, name)

        def checked(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            if stop.is_set():
                raise KeyboardInterrupt("the run was interrupted")
            return _method(*args, **kwargs)

        setattr(grid, name, checked)
