"""What steps mode costs (``audit.release = "steps"``): bytes per reply and server seconds per
reply against update mode, at the quickstart's model (paper MLP, p = 13,700) and 20 local steps.

``python -m benchmarks.release_steps [--quick]`` prints one JSON object. Each client trains one
honest round of the quickstart (σ = 1, batch 32, lr 4) with the ClientApp's own code path
(:func:`fedpriv.training.local_train`, :func:`clients.step_releases.steps_record`); its reply is
then handed to :meth:`strategies.pipeline.AuditPipeline.accepted` — checked at the boundary,
verified, stored, tallied — once as an update-mode reply and once as a steps-mode reply, each
on its own store. Reported per reply: the bytes of its ArrayRecords as Flower serialises them
(``.npy``), and the median server seconds, with the verdict (both must be ``consistent``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.timing import summarize

__all__ = ["measure"]

PRESET = "configs/quickstart.toml"


class _Reply:
    """A reply as the ClientApp builds it, in a stand-in for Flower's ``Message`` (as
    benchmarks/audit_costs.py: a real Message needs a Flower runtime)."""

    def __init__(self, node: int, records: dict[str, Any]) -> None:
        from flwr.app import RecordDict

        self.metadata = SimpleNamespace(src_node_id=node)
        self.content = RecordDict(dict(records))

    @staticmethod
    def has_error() -> bool:
        return False


def _round(cfg: Any, dataset: Any, rnd: int, steps: int) -> tuple[list, dict[str, Any]]:
    """One honest round of client ``rnd mod N`` in round ``rnd``: the broadcast θ and the
    reply's records (steps included)."""
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord

    from clients.local_data import client_data
    from clients.step_releases import steps_record
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.models import build_model
    from fedpriv.protocol import REPORT_RECORD, STEPS_RECORD, ClientReport, sampling_rate
    from fedpriv.seeding import make_generator
    from fedpriv.training import local_optimizer, local_train

    pid = rnd % cfg.data.num_clients
    x, y, _ = client_data(cfg.data, cfg.seed, pid, cfg.data.num_clients)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model.name, tuple(x.shape[1:]), dataset.num_classes)
    broadcast = [t.detach().numpy().copy() for t in model.state_dict().values()]
    mechanism = build_mechanism(cfg.mechanism.name, cfg.mechanism.params)
    optimizer, t = local_optimizer(cfg.train), cfg.train
    result = local_train(model, x, y, mechanism, lr=t.lr, local_steps=steps,
                         batch_size=t.batch_size, sampling=t.sampling,
                         generator=make_generator(cfg.seed, pid, rnd), optimizer=optimizer,
                         keep_releases=True)
    n = int(x.shape[0])
    report = ClientReport(partition_id=pid, server_round=rnd, local_examples=n, local_steps=steps,
                          lr=t.lr, batch_size=float(t.batch_size), sampling=t.sampling,
                          sample_rate=sampling_rate(n, t.batch_size), mechanism=mechanism,
                          optimizer=optimizer.settings)
    records = {"arrays": ArrayRecord(model.state_dict()),
               "metrics": MetricRecord({"num-examples": n, "train-loss": result.loss}),
               REPORT_RECORD: ConfigRecord(report.to_config()),
               STEPS_RECORD: steps_record(model, result.releases)}
    return broadcast, records


def _bytes(records: dict[str, Any]) -> int:
    from flwr.app import ArrayRecord

    return sum(len(a.data) for r in records.values() if isinstance(r, ArrayRecord)
               for a in r.values())


def _server_seconds(cfg: Any, dataset: Any, rounds: list, mode: str) -> tuple[list, list]:
    """Seconds of ``AuditPipeline.accepted`` per reply, and the verdicts, on a fresh store."""
    import dataclasses

    from fedpriv.audit import AuditStore
    from fedpriv.protocol import STEPS_RECORD
    from strategies.pipeline import AuditPipeline

    audit = dataclasses.replace(cfg.audit, release=mode)
    seconds, verdicts = [], []
    with tempfile.TemporaryDirectory(prefix="fedpriv-release-steps-") as tmp:
        store = AuditStore.create(Path(tmp) / "run", cfg.to_dict(), cfg.seed)
        auditor = AuditPipeline(audit, store, dataset, model=cfg.model.name,
                                num_clients=cfg.data.num_clients, seed=cfg.seed,
                                device=cfg.device, train=cfg.train)
        for rnd, (broadcast, records) in enumerate(rounds, start=1):
            kept = {k: v for k, v in records.items() if mode == "steps" or k != STEPS_RECORD}
            node = 1 + (rnd % cfg.data.num_clients)
            reply = _Reply(node, kept)
            auditor.begin_round(rnd, broadcast)
            start = time.perf_counter()
            auditor.accepted(rnd, [(node, reply)], broadcast)
            if rnd > 1:  # the first reply pays the imports and caches: untimed
                seconds.append(time.perf_counter() - start)
            auditor.end_round(rnd, 0.5, 1.0)
            row = store.query("SELECT verification_json FROM tallies WHERE round = ?", (rnd,))
            verdicts.append(json.loads(row[0]["verification_json"])["status"] if row else None)
        store.close()
    return seconds, verdicts


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """Bytes and server seconds per reply in both modes, over ``replies`` timed replies after
    one untimed (``smoke``: two replies of 2 steps, which runs the code and measures
    nothing)."""
    import logging

    from strategies.server_run import dataset_of
    from workflows.config import load_config

    logging.getLogger("absl").setLevel(logging.ERROR)
    steps = 2 if smoke else 20
    replies = 2 if smoke else 5 if quick else 20
    cfg = load_config(PRESET, [f"train.local_steps={steps}", "audit.release=steps",
                               "audit.attacks=[]"])
    dataset = dataset_of(cfg)
    rounds = [_round(cfg, dataset, rnd, steps) for rnd in range(1, replies + 2)]
    dim = sum(a.size for a in rounds[0][0])
    out: dict[str, Any] = {"model": cfg.model.name, "parameters": dim, "local_steps": steps,
                           "replies": replies}
    from fedpriv.protocol import STEPS_RECORD

    for mode in ("update", "steps"):
        seconds, verdicts = _server_seconds(cfg, dataset, rounds, mode)
        records = rounds[0][1]
        sent = records if mode == "steps" else {k: v for k, v in records.items()
                                                if k != STEPS_RECORD}
        out[mode] = {"bytes_per_reply": _bytes(sent),
                     "server_s_per_reply": summarize(seconds, digits=5),
                     "verdicts": sorted(set(map(str, verdicts)))}
    update, stepped = out["update"], out["steps"]
    out["bytes_ratio"] = round(stepped["bytes_per_reply"] / update["bytes_per_reply"], 2)
    out["seconds_ratio"] = round(stepped["server_s_per_reply"]["median"]
                                 / update["server_s_per_reply"]["median"], 2)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 replies instead of 20")
    parser.add_argument("--smoke", action="store_true", help="2 replies of 2 steps")
    args = parser.parse_args()
    print(json.dumps(measure(args.quick, smoke=args.smoke)))
