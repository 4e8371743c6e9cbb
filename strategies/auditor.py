"""The honest-but-curious server's ledger: what each client released, and what it leaked.

First version: participation, mechanisms, failures and the server's accuracy, kept in memory.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Message

from fedpriv.config import Config

__all__ = ["Auditor"]

log = logging.getLogger(__name__)


@dataclass
class ClientLedger:
    client_id: int
    mechanism: str
    mechanism_params: dict[str, Any]
    formal_guarantee: bool
    rounds: list[int] = field(default_factory=list)


class Auditor:
    """Receives every broadcast and reply from :class:`~strategies.auditing.AuditingFedAvg`."""

    def __init__(self, cfg: Config, run_dir: Path) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.clients: dict[int, ClientLedger] = {}
        self.failures: list[dict[str, Any]] = []
        self.accuracy: dict[int, float] = {}
        self.loss: dict[int, float] = {}

    def begin_round(self, server_round: int, broadcast: list[np.ndarray]) -> None:
        """A round starts: θ is about to be sent."""

    def _fail(self, server_round: int, node_id: int, kind: str, message: str) -> bool:
        log.warning("round %d: reply from node %d %s: %s", server_round, node_id, kind, message)
        self.failures.append(
            {"round": server_round, "node_id": node_id, "kind": kind, "message": message}
        )
        return False

    def on_reply(self, server_round: int, msg: Message, broadcast: list[np.ndarray]) -> bool:
        """Record one client's reply; return whether it may be aggregated."""
        node = int(msg.metadata.src_node_id)
        if msg.has_error():
            return self._fail(server_round, node, "error", str(msg.error.reason))
        local = msg.content["arrays"].to_numpy_ndarrays()
        if [a.shape for a in local] != [b.shape for b in broadcast]:
            return self._fail(server_round, node, "shape", "update shapes differ from the model")
        if not all(np.isfinite(a).all() for a in local):
            return self._fail(server_round, node, "non-finite", "update holds NaN or inf")
        meta = msg.content["meta"]
        cid = int(meta["partition-id"])
        ledger = self.clients.get(cid)
        if ledger is None:
            ledger = self.clients[cid] = ClientLedger(
                cid,
                str(meta["mechanism"]),
                json.loads(str(meta["mechanism-params"])),
                bool(meta["formal-guarantee"]),
            )
        ledger.rounds.append(server_round)
        return True

    def end_round(self, server_round: int, accuracy: float, loss: float) -> None:
        """The round's aggregation and evaluation are done."""
        self.accuracy[server_round] = accuracy
        self.loss[server_round] = loss

    def report(self, wall_seconds: float) -> dict[str, Any]:
        """The ``simulate`` object of the command-line contract."""
        rounds = sorted(r for r in self.accuracy if r > 0)
        clients = [
            {
                "client_id": c.client_id,
                "mechanism": c.mechanism,
                "mechanism_params": c.mechanism_params,
                "formal_guarantee": c.formal_guarantee,
                "rounds_participated": len(c.rounds),
                "epsilon": None,
                "delta": self.cfg.audit.delta,
                "log_bayes_capacity": None,
                "mbp_bound": None,
                "mbp_estimate": None,
                "abp_estimate": None,
                "attack": {"mse": None, "psnr": None, "ssim": None},
            }
            for c in sorted(self.clients.values(), key=lambda c: c.client_id)
        ]
        return {
            "run_dir": str(self.run_dir),
            "rounds": len(rounds),
            "accuracy": [self.accuracy[r] for r in rounds],
            "loss": [self.loss[r] for r in rounds],
            "initial_accuracy": self.accuracy.get(0, math.nan),
            "clients": clients,
            "failures": self.failures,
            "wall_seconds": wall_seconds,
        }
