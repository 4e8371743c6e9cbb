"""What canary audits cost per client-round (issue #15; docs/canaries.md).

``python -m benchmarks.canaries [--quick]`` prints one JSON object. At the paper MLP's
p = 13,700, for coordinate and random canaries: the client's work (the round's in-canary sum,
:func:`fedpriv.canaries.canary_sum`) and the server's (:class:`strategies.canary_audit.
CanaryAuditor`: removing the canaries' share from the reply, scoring them, and the one-run
bounds of the round and of the pool), with the pool holding 1 round and
``POOLED_CANARIES / count`` rounds (its most). Gaussian releases of a σ = 1 client with one local
step; the numbers are milliseconds per client-round.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from benchmarks.timing import timed

__all__ = ["measure"]

DIM = 13_700


def _server(kind: str, count: int, rounds: int, repeats: int) -> dict[str, Any]:
    """Server milliseconds per client-round with ``rounds`` rounds in the pool (the pool drops
    its oldest round beyond ``POOLED_CANARIES``, so scoring again keeps it that full)."""
    from fedpriv.canaries import canary_sum
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.protocol import ClientReport
    from strategies.canary_audit import CanaryAuditor
    from workflows.config import config_from_dict

    cfg = config_from_dict({"audit": {"canaries": {"enabled": True, "kind": kind,
                                                   "count": count}}})
    mech = build_mechanism("gaussian", {"noise_multiplier": 1.0})
    report = ClientReport(partition_id=0, server_round=1, local_examples=16, local_steps=1,
                          lr=0.5, batch_size=16.0, sampling="poisson", sample_rate=1.0,
                          mechanism=mech)  # divisor q·n = 16
    design = CanaryAuditor(cfg.audit, cfg.seed).design(1, 0, mech, DIM)
    noise = np.random.default_rng(0).standard_normal(DIM)
    arrays = [(-0.5 * (canary_sum(design) + noise) / 16.0).astype(np.float32)]
    flat = arrays[0].astype(np.float64)
    auditor = CanaryAuditor(cfg.audit, cfg.seed)

    def one_round() -> None:
        audit = auditor if rounds > 1 else CanaryAuditor(cfg.audit, cfg.seed)
        audit.without_canaries(1, 0, report, arrays)
        audit.score(1, 0, report, flat)

    for _ in range(rounds - 1):
        one_round()
    return timed(one_round, repeats)


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """Client and server milliseconds per client-round (module docstring; ``smoke``: 10
    canaries, a pool of 2 rounds, one call each: it runs the code, it measures nothing)."""
    from fedpriv.canaries import CanaryDesign, canary_sum
    from strategies.canary_audit import POOLED_CANARIES

    repeats = 1 if smoke else 3 if quick else 10
    out: dict[str, Any] = {"dim": DIM, "pooled_canaries": POOLED_CANARIES, "rows": {}}
    for kind in ("coordinate", "random"):
        count = 10 if smoke else 1_000
        design = CanaryDesign(1, count, DIM, 1.0, kind)
        full = 2 if smoke else POOLED_CANARIES // count
        out["rows"][f"{kind}/{count}"] = {
            "client_ms": timed(lambda d=design: canary_sum(d), repeats),
            "server_ms_pool_1_round": _server(kind, count, 1, repeats),
            f"server_ms_pool_{full}_rounds": _server(kind, count, full, repeats),
        }
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(json.dumps(measure(parser.parse_args().quick)))
