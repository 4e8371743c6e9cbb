"""workflows.flower_queue hands out, tick by tick, exactly the messages Flower's own loop
(``get_message_ins(node, limit=1)`` for every node) hands out, in the same order, and deletes
the same expired ones; the patch is in place only inside its ``with`` block; the grid's pulls
are spaced by the federation's size, never below Flower's 0.1 s; a grid whose run is
interrupted stops waiting for replies that will never come."""

from __future__ import annotations

import threading
import time
from queue import Queue

import pytest
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.server.superlink.fleet.vce import vce_api
from flwr.server.superlink.linkstate import LinkStateFactory
from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME
from flwr.supercore.object_store import ObjectStoreFactory
from flwr.superlink.federation import NoOpFederationManager
from flwr.superlink.grid.inmemory_grid import InMemoryGrid
from process_support import PATIENCE

from benchmarks.ray_queue import simulation_state
from workflows.flower_queue import (
    indexed_message_queue,
    one_pass_queue,
    pace_pulls,
    stop_pulls,
    undelivered_per_node,
)

NODES = 7
# (node index, tag): several messages for some nodes, none for node 5, node 3's first expired
PUSHED = [(0, "a"), (1, "b"), (0, "c"), (2, "d"), (3, "expired"), (3, "e"), (6, "f"),
          (0, "g"), (4, "h"), (6, "i"), (1, "j")]  # fmt: skip


def _state_with_messages():
    """An in-memory state as the simulation builds it, with :data:`PUSHED` stored through the
    grid; returns (state, node id → partition)."""
    state, grid, nodes = simulation_state(NODES)
    ids = list(nodes)
    messages = [Message(RecordDict({"config": ConfigRecord({"tag": tag})}), dst_node_id=ids[i],
                        message_type="train", group_id="1") for i, tag in PUSHED]  # fmt: skip
    grid.push_messages(messages)
    for msg in state.message_ins_store.values():  # one message's time to live is over
        if msg.content["config"]["tag"] == "expired":
            msg.metadata.created_at -= msg.metadata.ttl + 1
    return state, nodes


def _tags(messages) -> list[str]:  # noqa: ANN001
    return [m.content["config"]["tag"] for m in messages]


def _flower_tick(state, nodes) -> list[Message]:  # noqa: ANN001
    """One pass of Flower's own loop (``vce_api.add_messages_to_queue``)."""
    return [m for node in nodes for m in state.get_message_ins(node_id=node, limit=1)]


def test_one_pass_hands_out_what_flowers_loop_hands_out():
    flower, nodes = _state_with_messages()
    ours, our_nodes = _state_with_messages()
    ticks = []
    while True:
        want, got = _flower_tick(flower, nodes), undelivered_per_node(ours, our_nodes)
        assert _tags(got) == _tags(want)
        assert all(m.metadata.delivered_at for m in got)
        ticks.append(_tags(got))
        if not want:
            break
    # one message per node and tick, in node order, each node's in the order pushed
    assert ticks == [["a", "b", "d", "e", "h", "f"], ["c", "j", "i"], ["g"], []]
    for state in (flower, ours):  # both deleted the expired message, and only that one
        assert "expired" not in _tags(state.message_ins_store.values())
        assert len(state.message_ins_store) == len(PUSHED) - 1


def test_later_messages_follow_once_the_first_are_deleted():
    flower, nodes = _state_with_messages()
    ours, our_nodes = _state_with_messages()
    for _ in range(4):  # replies are pulled: the grid deletes the messages they answer
        want, got = _flower_tick(flower, nodes), undelivered_per_node(ours, our_nodes)
        assert _tags(got) == _tags(want)
        flower.delete_messages({m.metadata.message_id for m in want})
        ours.delete_messages({m.metadata.message_id for m in got})
    assert not flower.message_ins_store and not ours.message_ins_store


def test_the_queue_thread_and_the_patch():
    state, nodes = _state_with_messages()
    queue: Queue = Queue()
    stop = threading.Event()
    thread = threading.Thread(target=one_pass_queue, args=(state, queue, nodes, stop))
    thread.start()
    deadline = time.monotonic() + 60
    while queue.qsize() < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join()
    assert _tags(queue.get() for _ in range(queue.qsize())) == ["a", "b", "d", "e", "h", "f"]
    original = vce_api.add_messages_to_queue
    with indexed_message_queue():
        assert vce_api.add_messages_to_queue is one_pass_queue
    assert vce_api.add_messages_to_queue is original


def test_pulls_are_spaced_by_the_number_of_clients():
    factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(),
                               ObjectStoreFactory())  # fmt: skip
    grids = [InMemoryGrid(state_factory=factory) for _ in range(3)]
    assert grids[0].pull_interval == 0.1  # Flower's default
    for grid, clients, want in zip(grids, (10, 1000, 10_000), (0.1, 1.0, 10.0), strict=True):
        pace_pulls(grid, clients)
        assert grid.pull_interval == want

    class Other:  # a grid of another kind: left alone
        pass

    other = Other()
    pace_pulls(other, 1000)
    assert not hasattr(other, "pull_interval")


def test_an_interrupted_grid_stops_waiting_for_replies():
    """Nothing answers (the simulation engine was stopped): send_and_receive would wait out its
    timeout; once the stop event is set it raises KeyboardInterrupt at its next pull."""
    _, grid, nodes = simulation_state(NODES)
    stop = threading.Event()
    stop_pulls(grid, stop)
    assert sorted(grid.get_node_ids()) == sorted(nodes)  # unchanged while the run goes on
    message = Message(RecordDict({"config": ConfigRecord({"tag": "x"})}),
                      dst_node_id=next(iter(nodes)), message_type="train", group_id="1")
    raised: list[BaseException] = []
    pulled = threading.Event()
    pull = grid.pull_messages

    def counting_pull(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        pulled.set()
        return pull(*args, **kwargs)

    grid.pull_messages = counting_pull

    def wait_for_reply() -> None:
        try:
            grid.send_and_receive([message], timeout=3600)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            raised.append(exc)

    waiter = threading.Thread(target=wait_for_reply)
    waiter.start()
    assert pulled.wait(PATIENCE)  # it is waiting for the reply
    stop.set()
    waiter.join(PATIENCE)
    assert not waiter.is_alive() and [type(e) for e in raised] == [KeyboardInterrupt]
    with pytest.raises(KeyboardInterrupt):
        grid.get_node_ids()
