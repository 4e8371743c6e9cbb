"""What the audit store costs per reply: one client's writes, timed without Flower or training.

``python -m benchmarks.store_writes`` prints one JSON object. For ``clients`` replies per round
it writes what the auditor writes for each accepted reply — in one :meth:`AuditStore.batch` —
then completes the round (the one sync pass): under ``audit.store_updates = "all"`` the update
(13,700 float32, the paper MLP), the true batch (16 images 16×16 and labels) and the tally;
under ``"attacked"`` for a client not attacked, the record ids and the tally only. Reported: ms
per reply including the round's share of ``complete_round``, and that share alone (every write
also enters the record's hash chain, :mod:`fedpriv.audit.chain`); and the check of the whole
record afterwards (:func:`fedpriv.audit.verify`: the chain, file sizes — what ``fedpriv verify``
does but for reading every file — per reply stored).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.timing import summarize

__all__ = ["measure"]

TALLY = {"epsilon": 1.0, "delta": 1e-5, "accountant": "rdp", "route": "rdp", "releases": 1,
         "log_capacity_round": 2.0, "log_capacity_cumulative": 2.0, "mbp_bound": 0.0}
META = {"num_examples": 60, "local_steps": 1, "lr": 0.1, "batch_size": 16.0,
        "sample_rate": 0.27, "mechanism": "gaussian", "mechanism_params": {"clip": 1.0}}


def _round(store: Any, rnd: int, clients: int, keep: bool) -> tuple[float, float]:
    rng = np.random.default_rng(rnd)
    update = [rng.normal(size=s).astype(np.float32) for s in ((50, 256), (15, 50), (10, 15))]
    images = {"images": rng.random((16, 1, 16, 16), dtype=np.float32),
              "labels": np.arange(16) % 10}
    store.begin_round(rnd)
    store.write_global(rnd, update)
    start = time.perf_counter()
    for client in range(clients):
        with store.batch():
            store.write_update(rnd, client, update if keep else None, META)
            store.write_ground_truth(rnd, client, range(16), images if keep else None)
            store.write_tally(rnd, client, TALLY)
    replies = time.perf_counter()
    store.complete_round(rnd)
    return time.perf_counter() - start, time.perf_counter() - replies


def measure(clients: int = 300, rounds: int = 3) -> dict[str, Any]:
    """ms per reply (and the completion's share) for the two storage policies."""
    from fedpriv.audit import AuditStore, verify

    out: dict[str, Any] = {"clients": clients, "rounds": rounds}
    for policy, keep in (("all", True), ("attacked", False)):
        with tempfile.TemporaryDirectory(prefix="fedpriv-store-writes-") as tmp:
            store = AuditStore.create(Path(tmp) / "run", {}, seed=0)
            times = [_round(store, rnd, clients, keep) for rnd in range(1, rounds + 1)]
            store.close()
            start = time.perf_counter()
            findings = verify(store.run_dir, hashes=False)  # none: an intact record
            check = time.perf_counter() - start
        out[policy] = {
            "ms_per_reply": summarize([t / clients for t, _ in times], scale=1e3, digits=3),
            "complete_round_ms_per_reply": summarize([c / clients for _, c in times], scale=1e3,
                                                     digits=3),
            "verify_ms_per_reply": round(check / (clients * rounds) * 1e3, 4),
            "verify_findings": len(findings),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(measure()))
