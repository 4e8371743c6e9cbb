"""FedAvg with an honest-but-curious server: every reply is shown to an auditor first.

The strategy remembers the parameters θ it broadcast each round; for every reply the
:class:`~strategies.auditor.Auditor` sees θ, the client's new parameters and its metadata,
records the update, and says whether the reply is fit to aggregate (finite, right shapes).
Rejected and failed replies never reach aggregation, so a non-finite update cannot poison the
global model; otherwise aggregation is exactly FedAvg's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.exception import InconsistentMessageReplies
from flwr.serverapp.strategy import FedAvg

from strategies.auditor import Auditor

__all__ = ["AuditingFedAvg"]


class AuditingFedAvg(FedAvg):
    """FedAvg that reports every broadcast and every reply to an :class:`Auditor`.

    Parameters
    ----------
    auditor
        Receives ``begin_round``, ``on_reply`` and ``end_round`` calls.
    round_offset
        Rounds already completed by an earlier run (``--resume``): Flower counts from 1, the
        audit store and the clients' seeds use ``offset + round``.
    **kwargs
        Passed to :class:`flwr.serverapp.strategy.FedAvg`.
    """

    def __init__(self, auditor: Auditor, round_offset: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.auditor = auditor
        self.round_offset = round_offset
        self._broadcast: list[np.ndarray] = []

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Remember θ, then sample clients as FedAvg does; the round number sent is absolute."""
        absolute = server_round + self.round_offset
        self._broadcast = arrays.to_numpy_ndarrays()
        self.auditor.begin_round(absolute, self._broadcast)
        messages = list(super().configure_train(server_round, arrays, config, grid))
        # The first round waits for every node to join; later rounds train whoever is still
        # there, so a node that died is a failed reply and not a round that waits forever.
        self.min_available_nodes = self.min_train_nodes = 1
        for msg in messages:
            msg.content["config"]["server-round"] = absolute
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Audit every reply, then FedAvg over the accepted ones, summed in client order
        (floating-point sums depend on order; replies arrive in any order, and a resumed
        run must aggregate exactly as an uninterrupted one). Replies that Flower still finds
        inconsistent with each other are recorded and the round keeps the old θ."""
        absolute = server_round + self.round_offset
        accepted = [m for m in replies if self.auditor.on_reply(absolute, m, self._broadcast)]
        accepted.sort(key=lambda m: int(m.content["meta"]["partition-id"]))
        try:
            return super().aggregate_train(server_round, accepted)
        except InconsistentMessageReplies as exc:
            self.auditor.store.record_failure(absolute, "malformed", str(exc))
            return None, None
