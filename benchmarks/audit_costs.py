"""Where the auditing server's time goes: the AuditPipeline's round work without Flower or Ray.

``python -m benchmarks.audit_costs [--quick]`` prints one JSON object. For N clients it
replays what :func:`strategies.server_run.run_federation` does on the server each round —
``AuditPipeline.begin_round`` (θ to the store), ``AuditPipeline.accepted`` on every
``(node, reply)`` (checked; update and ground truth written, ε / log C / ξ tallied),
``AuditPipeline.end_round`` and
``write_report`` — on replies shaped like the quickstart's (paper MLP, 20 local steps of
batch 32, the client's record ids, θ moved by the declared Gaussian noise alone, so that every
reply passes verification), with ``audit.enabled`` true and false. It reports the
server seconds per round of each mode, and a cProfile of the logging mode: the functions with
the largest own time, which say whether disk syncs, SQLite, accounting or the report dominate.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import pstats
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from benchmarks.timing import summarize

__all__ = ["audit_costs", "server_round_seconds"]

PRESET = "configs/quickstart.toml"


class _Reply:
    """A reply as the ClientApp builds it (real records), in a stand-in for Flower's
    ``Message``, of which ``AuditPipeline.accepted`` reads ``content``, ``metadata.src_node_id`` and
    ``has_error()``; a real Message needs a Flower runtime to exist."""

    def __init__(self, node: int, state: dict[str, Any], meta: dict[str, Any]) -> None:
        from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

        self.metadata = SimpleNamespace(src_node_id=node)
        self.content = RecordDict({
            "arrays": ArrayRecord(state),
            "metrics": MetricRecord({"num-examples": int(meta["local-examples"])}),
            "meta": ConfigRecord(meta),
        })

    @staticmethod
    def has_error() -> bool:
        return False


def _replies(cfg: Any, dataset: Any, model: Any, rnd: int) -> list[tuple[int, _Reply]]:
    """``(node, reply)`` of every client, as ``AuditPipeline.accepted`` takes them."""
    import torch

    from fedpriv.data import partition_indices

    rng = np.random.default_rng(rnd)
    n = cfg.data.num_clients
    # the declared Gaussian's noise on θ after k steps: η·σC·√k / L per coordinate (u = L·Σ_t r_t,
    # privacy-math.md §9.2), so that the replies pass verification as honest ones do
    params, train = cfg.mechanism.params, cfg.train
    noise = (train.lr * params["noise_multiplier"] * params["clip"]
             * float(np.sqrt(train.local_steps)) / train.batch_size)
    parts = partition_indices(dataset.train_y.numpy(), n, cfg.data.partition,
                              cfg.data.dirichlet_alpha, cfg.seed)
    out = []
    for cid, ids in enumerate(parts):
        q = min(1.0, cfg.train.batch_size / len(ids))
        batches = [ids[rng.random(len(ids)) < q].tolist() for _ in range(cfg.train.local_steps)]
        meta = {"partition-id": cid, "server-round": rnd, "local-examples": len(ids),
                "steps": cfg.train.local_steps, "sampling": cfg.train.sampling,
                "lr": cfg.train.lr, "batch-size": cfg.train.batch_size, "sample-rate": q,
                "mechanism": cfg.mechanism.name,
                "mechanism-params": json.dumps(cfg.mechanism.params),
                "formal-guarantee": True, "record-ids": json.dumps(batches)}
        gen = torch.Generator().manual_seed(1000 * rnd + cid)
        state = {k: v + noise * torch.randn(v.shape, generator=gen)
                 for k, v in model.state_dict().items()}
        out.append((cid + 1, _Reply(cid + 1, state, meta)))
    return out


def server_round_seconds(clients: int, rounds: int, enabled: bool,
                         profiler: cProfile.Profile | None = None) -> list[float]:
    """Server seconds of each round (begin, every reply, end, report) on a fresh store."""
    from fedpriv.audit import AuditStore, write_report
    from strategies.pipeline import AuditPipeline
    from strategies.server_run import dataset_of, initial_model
    from workflows.config import load_config

    overrides = [f"data.num_clients={clients}", f"audit.enabled={str(enabled).lower()}",
                 "audit.attacks=[]"]
    cfg = load_config(PRESET, overrides)
    dataset, model = dataset_of(cfg), initial_model(cfg)
    broadcast = [t.numpy() for t in model.state_dict().values()]
    seconds = []
    with tempfile.TemporaryDirectory(prefix="fedpriv-audit-costs-") as tmp:
        store = AuditStore.create(Path(tmp) / "run", cfg.to_dict(), cfg.seed)
        auditor = AuditPipeline(cfg.audit, store, dataset, model=cfg.model.name,
                                num_clients=cfg.data.num_clients, seed=cfg.seed,
                                device=cfg.device, train=cfg.train)
        for rnd in range(1, rounds + 1):
            replies = _replies(cfg, dataset, model, rnd)
            if profiler:
                profiler.enable()
            start = time.perf_counter()
            auditor.begin_round(rnd, broadcast)
            auditor.accepted(rnd, replies, broadcast)
            auditor.end_round(rnd, 0.5, 1.0)
            write_report(store)
            seconds.append(time.perf_counter() - start)
            if profiler:
                profiler.disable()
        store.close()
    return seconds


def _top(profiler: cProfile.Profile, count: int = 10) -> list[dict[str, Any]]:
    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values()) or 1.0  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)  # type: ignore[attr-defined]
    return [{"function": f"{Path(file).name}:{line}({name})", "calls": calls,
             "own_time_share": round(own / total, 3), "cumulative_s": round(cum, 3)}
            for (file, line, name), (_, calls, own, cum, _) in rows[:count]]


def audit_costs(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """Server seconds per round with and without auditing, and the profile (docstring;
    ``smoke``: 2 clients and 2 rounds, which runs the code and measures nothing)."""
    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's convergence notes
    rounds = 2 if smoke else 3 if quick else 6
    profiled = 2 if smoke else 50
    out: dict[str, Any] = {"rounds": rounds, "per_round_s": {}}
    for clients in (2,) if smoke else (10, 50):
        for enabled in (False, True):
            mode = "logging" if enabled else "off"
            out["per_round_s"][f"{clients}/{mode}"] = summarize(
                server_round_seconds(clients, rounds, enabled), digits=4)
    profiler = cProfile.Profile()
    server_round_seconds(profiled, rounds, True, profiler)
    out[f"profile_{profiled}_clients_logging"] = _top(profiler)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    print(json.dumps(audit_costs(parser.parse_args().quick)))
