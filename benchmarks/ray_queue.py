"""Why Flower's Ray route grew as N², and what fedpriv's one-pass message loop changes.

``python -m benchmarks.ray_queue [--quick | --smoke]`` prints one JSON object:

* ``tick`` — one pass of the loop that hands the ServerApp's messages to the Ray actors, alone
  (no Ray): Flower 1.41–1.42's ``get_message_ins(node, limit=1)`` for each of N nodes with the
  round's N messages stored, against :func:`workflows.flower_queue.undelivered_per_node`;
  wall and CPU seconds of the first pass (hands out every message) and of a later one
  (everything delivered, replies pending: what the loop repeats ten times a second);
* ``pull`` — one pull of the ServerApp's grid (``InMemoryGrid.pull_messages``) over N pending
  messages, which ``send_and_receive`` repeats every ``pull_interval`` until the round's
  replies are in;
* ``runs`` — ``fedpriv simulate`` on Ray (2 CPUs, the scaling workload of
  :mod:`benchmarks.scaling`, audit on) at 10 / 100 / 1,000 clients with each loop
  (``flower``: fedpriv's one-pass loop and its pacing of the grid's pulls,
  :func:`workflows.flower_queue.pace_pulls`, both undone), in a watched subprocess: seconds per
  round (spacing of the ``completed`` stamps of rounds 2…R) and the driver process's CPU
  seconds per round over the same spacing (the ServerApp, Flower's engine threads and the
  audit; the actors are other processes). Settings alternate, so load changes fall on both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import load_average
from benchmarks.proctree import run_json
from benchmarks.timing import ratio, summarize

__all__ = ["measure", "pull_costs", "ray_run", "tick_costs"]

ROOT = Path(__file__).resolve().parent.parent
LOOPS = ("flower", "one-pass")


# -- one pass of the loop, alone --------------------------------------------------------------


def simulation_state(nodes: int) -> tuple[Any, Any, dict[int, int]]:
    """An in-memory link state, its grid and the node id → partition map, as Flower's
    simulation builds them for ``nodes`` nodes (Flower 1.42's private constructors: the one
    place they are used, here and in tests/test_flower_queue.py)."""
    from flwr.common.constant import RUN_ID_NUM_BYTES, SUPERLINK_NODE_ID
    from flwr.proto.task_pb2 import Task  # pylint: disable=E0611
    from flwr.server.superlink.fleet.vce.vce_api import _register_nodes
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord
    from flwr.server.superlink.linkstate.utils import generate_rand_int_from_bytes
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME, NOOP_FEDERATION_ID
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.superlink.federation import NoOpFederationManager
    from flwr.superlink.grid.inmemory_grid import InMemoryGrid

    factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(),
                               ObjectStoreFactory())  # fmt: skip
    run_id = generate_rand_int_from_bytes(RUN_ID_NUM_BYTES)
    run = Run.create_empty(run_id=run_id)
    run.primary_task_id, run.federation_id = 7, NOOP_FEDERATION_ID
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, SUPERLINK_NODE_ID
    state = factory.state()
    state.run_ids[run_id] = RunRecord(run=run)
    state.task_store[7] = Task(task_id=7, run_id=run_id)
    mapping = _register_nodes(nodes, factory)
    grid = InMemoryGrid(state_factory=factory)
    grid.set_run(run)
    return state, grid, mapping


def _state(nodes: int) -> tuple[Any, dict[int, int]]:
    """:func:`simulation_state` with one message per node stored through its grid."""
    from flwr.app import ConfigRecord, Message, RecordDict

    state, grid, mapping = simulation_state(nodes)
    grid.push_messages([Message(RecordDict({"config": ConfigRecord({"x": 1})}), dst_node_id=n,
                                message_type="train", group_id="1") for n in mapping])
    return state, mapping


def _one_tick(loop: str, state: Any, mapping: dict[int, int]) -> tuple[float, float, int]:
    from workflows.flower_queue import undelivered_per_node

    wall, cpu = time.perf_counter(), time.process_time()
    if loop == "flower":
        got = sum(len(state.get_message_ins(node_id=n, limit=1)) for n in mapping)
    else:
        got = len(undelivered_per_node(state, mapping))
    return time.perf_counter() - wall, time.process_time() - cpu, got


def tick_costs(sizes: tuple[int, ...], repeats: int = 2) -> list[dict[str, Any]]:
    """Seconds of one pass of each loop at each size (first pass, then ``repeats`` later
    passes); Flower's loop is skipped above 1,000 nodes (minutes per pass)."""
    import logging

    logging.getLogger("flwr").setLevel(logging.ERROR)
    rows = []
    for nodes in sizes:
        for loop in LOOPS:
            if loop == "flower" and nodes > 1000:
                continue
            state, mapping = _state(nodes)
            first = _one_tick(loop, state, mapping)
            later = [_one_tick(loop, state, mapping) for _ in range(repeats)]
            rows.append({"nodes": nodes, "loop": loop, "handed_out": first[2],
                         "first_wall_s": round(first[0], 5), "first_cpu_s": round(first[1], 5),
                         "later_wall_s": summarize([w for w, _, _ in later], digits=5),
                         "later_cpu_s": summarize([c for _, c, _ in later], digits=5)})
    return rows


def pull_costs(sizes: tuple[int, ...], repeats: int = 3) -> list[dict[str, Any]]:
    """CPU seconds of one ``InMemoryGrid.pull_messages`` over N pending messages (none
    answered yet): what ``send_and_receive`` repeats every ``pull_interval``."""
    import logging

    from flwr.superlink.grid.inmemory_grid import InMemoryGrid

    logging.getLogger("flwr").setLevel(logging.ERROR)
    rows = []
    for nodes in sizes:
        state, _ = _state(nodes)
        grid = InMemoryGrid.__new__(InMemoryGrid)  # the state's own grid, as _state made it
        grid.state, grid._run = state, next(iter(state.run_ids.values())).run
        ids = set(state.message_ins_store)
        cpu = []
        for _ in range(repeats):
            start = time.process_time()
            grid.pull_messages(ids)
            cpu.append(time.process_time() - start)
        rows.append({"pending": nodes, "pull_cpu_s": summarize(cpu, digits=5)})
    return rows


# -- fedpriv simulate on Ray ------------------------------------------------------------------


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """In the subprocess: one ``fedpriv simulate`` run with the chosen loop; the driver's CPU
    time when each round completes."""
    import workflows.flower_queue
    from benchmarks.scaling import _round_facts
    from strategies.pipeline import AuditPipeline
    from workflows.config import load_config
    from workflows.simulation import simulate

    if spec["loop"] == "flower":  # Flower's own loop and pulls: fedpriv's changes undone
        workflows.flower_queue.indexed_message_queue = contextlib.nullcontext
        workflows.flower_queue.pace_pulls = lambda grid, clients: None
    cpu: list[float] = []
    end = AuditPipeline.end_round

    def end_round(self: AuditPipeline, rnd: int, accuracy: float, loss: float) -> None:
        end(self, rnd, accuracy, loss)
        cpu.append(time.process_time())

    AuditPipeline.end_round = end_round  # type: ignore[method-assign]
    cfg = load_config(ROOT / "configs" / "quickstart.toml", spec["sets"])
    simulate(cfg, Path(spec["run_dir"]))
    spacing = [b - a for a, b in zip(cpu, cpu[1:], strict=False)]
    facts = _round_facts(Path(spec["run_dir"]))
    return {"round_spacings": facts["round_spacings"], "round_seconds": facts["round_seconds"],
            "driver_cpu_spacings": [round(x, 3) for x in spacing],
            "driver_cpu_seconds": summarize(spacing, digits=3) if spacing else None}


def ray_run(clients: int, loop: str, rounds: int, more: tuple[str, ...] = (),
            timeout: float = 3600.0) -> dict[str, Any]:
    """One run in a watched subprocess (:mod:`benchmarks.proctree`); never raises."""
    from benchmarks.scaling import MODES, WORKLOAD, data_sets

    work = Path(tempfile.mkdtemp(prefix=f"fedpriv-rayq-{clients}-"))
    sets = [*WORKLOAD, *data_sets(), f"data.num_clients={clients}", f"rounds={rounds}",
            *MODES["audit"], *more]  # fmt: skip
    spec = {"loop": loop, "sets": sets, "run_dir": str(work / "run")}
    row: dict[str, Any] = {"clients": clients, "loop": loop, "rounds": rounds,
                           "load_before": load_average()}
    argv = [sys.executable, "-m", "benchmarks.ray_queue", "--child", json.dumps(spec)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLWR_TELEMETRY_ENABLED": "0",
           "FLWR_DISABLE_UPDATE_CHECK": "1", "PYTHONPATH": str(ROOT)}
    try:
        out = run_json(argv, cwd=str(ROOT), env=env, work=work, row=row, timeout=timeout)
        if out is not None:
            row.update(out)
    except Exception as exc:  # a benchmark reports, it does not fail
        row["error"] = repr(exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


def _plan(quick: bool, smoke: bool) -> list[tuple[int, str, int]]:
    if smoke:
        return [(2, "one-pass", 2)]
    return [(c, loop, 4 if c < 1000 else 3) for _ in range(1 if quick else 2)
            for c in (10, 100, 1000) for loop in LOOPS]


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """The tick costs and the Ray runs of the plan, pooled per (clients, loop), with the
    ratios 1,000 / 100 clients and Flower's loop / one pass."""
    from benchmarks.simulation import SMOKE_SETS

    ticks = tick_costs((10,) if smoke else (10, 100, 1000, 10_000), repeats=1 if smoke else 3)
    pulls = pull_costs((10,) if smoke else (10, 100, 1000, 10_000), repeats=1 if smoke else 3)
    runs = []
    for clients, loop, rounds in _plan(quick, smoke):
        runs.append(ray_run(clients, loop, rounds, tuple(SMOKE_SETS) if smoke else ()))
        print(f"[ray_queue] {clients} clients, {loop}: "
              f"{(runs[-1].get('round_seconds') or {}).get('median')} s/round, "
              f"{(runs[-1].get('driver_cpu_seconds') or {}).get('median')} CPU s/round "
              f"{runs[-1].get('error', '')[-300:]}", file=sys.stderr, flush=True)
    pooled: dict[str, Any] = {}
    for key in dict.fromkeys(f"{r['clients']}/{r['loop']}" for r in runs):
        rows = [r for r in runs if f"{r['clients']}/{r['loop']}" == key]
        wall = [x for r in rows for x in r.get("round_spacings", [])]
        cpu = [x for r in rows for x in r.get("driver_cpu_spacings", [])]
        pooled[key] = {"runs": len(rows),
                       "round_seconds": summarize(wall, digits=3) if wall else None,
                       "driver_cpu_seconds": summarize(cpu, digits=3) if cpu else None}

    def over(a: str, b: str, field: str = "round_seconds") -> float | None:
        x, y = (pooled.get(a) or {}).get(field), (pooled.get(b) or {}).get(field)
        return ratio(x, y) if x and y else None

    return {
        "tick": ticks, "pull": pulls, "runs": runs, "pooled": pooled,
        "ratios": {
            f"{loop}_1000_over_100_{field}": over(f"1000/{loop}", f"100/{loop}", field)
            for loop in LOOPS for field in ("round_seconds", "driver_cpu_seconds")
        } | {
            f"flower_over_one_pass_{c}": over(f"{c}/flower", f"{c}/one-pass")
            for c in (10, 100, 1000)
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run per setting, not two")
    parser.add_argument("--smoke", action="store_true", help="tiny: runs, measures nothing")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--only", metavar="CLIENTS/LOOP/ROUNDS", help="one run, e.g. 100/flower/4")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
    elif args.only:
        clients, loop, rounds = args.only.split("/")
        print(json.dumps(ray_run(int(clients), loop, int(rounds))))
    else:
        print(json.dumps(measure(args.quick, smoke=args.smoke)))
