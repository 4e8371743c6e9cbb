"""The server's boundary: one train reply in, an accepted reply or a named rejection out.

:func:`check_reply` is pure (no store, no ledger): it reads the reply's
:class:`~fedpriv.protocol.ClientReport` once and checks everything the server can check without
statistics — the message shape Flower's aggregation needs, the report's fields, the client's
identity (a partition id in range, not already used this round, the same one its node claimed
before), the update's shapes and finiteness, the aggregation weight. Whatever fails becomes a
:class:`Rejection` with a kind and a reason; it never raises, so a faulty or malicious client
is one recorded failure and the round goes on. A client that declined to train (its ε budget,
``ClientReport.declined``) sends its report alone; once its identity checks pass it is a
:class:`Rejection` of kind ``declined`` — nothing to aggregate, not a fault.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from flwr.app import Message

from fedpriv.protocol import REPORT_RECORD, ClientReport, ReplyError

__all__ = ["AcceptedReply", "Rejection", "RoundIdentities", "check_reply"]


@dataclass(frozen=True)
class AcceptedReply:
    """A well-formed reply: its report, the client's new parameters and its FedAvg weight."""

    node_id: int
    report: ClientReport
    arrays: list[np.ndarray]
    weight: float
    message: Message

    @property
    def client_id(self) -> int:
        return self.report.partition_id


@dataclass(frozen=True)
class Rejection:
    """A reply that cannot be aggregated: ``kind`` is one of the store's failure kinds."""

    node_id: int
    client_id: int | None
    kind: str
    reason: str
    report: ClientReport | None = None
    claimed: bool = False  # client_id is only what a malformed report claims


@dataclass
class RoundIdentities:
    """Who is who: partition ids seen this round, and each node's partition id so far."""

    num_clients: int
    node_clients: dict[int, int]
    seen: set[int]

    @classmethod
    def start(cls, num_clients: int, node_clients: dict[int, int]) -> RoundIdentities:
        return cls(num_clients, node_clients, set())


def _report_record(msg: Message) -> Mapping:
    config_records = msg.content.config_records
    if REPORT_RECORD not in config_records:
        raise ReplyError(REPORT_RECORD, None, "a ConfigRecord with the client's report")
    return config_records[REPORT_RECORD]


def _content(msg: Message) -> tuple[Sequence[np.ndarray], float]:
    content = msg.content  # each *_records property builds a new dict: read each once
    array_records, metric_records = content.array_records, content.metric_records
    if len(array_records) != 1 or len(metric_records) != 1:
        raise ReplyError("content", "records", "exactly one ArrayRecord and one MetricRecord")
    metrics = next(iter(metric_records.values()))
    weight = metrics.get("num-examples")
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise ReplyError("num-examples", weight, "a number")
    arrays = next(iter(array_records.values())).to_numpy_ndarrays()
    return arrays, float(weight)


def _claimed(config: Mapping | None, identities: RoundIdentities) -> int | None:
    """The partition id a malformed report claims, to name the failure — only if it is a
    plausible id not yet used this round (the claim binds nothing)."""
    claim = None if config is None else config.get("partition-id")
    ok = isinstance(claim, int) and not isinstance(claim, bool)
    ok = ok and 0 <= claim < identities.num_clients and claim not in identities.seen
    return claim if ok else None


def check_reply(
    msg: Message, broadcast: Sequence[np.ndarray], identities: RoundIdentities,
    node: int | None = None,
) -> AcceptedReply | Rejection:
    """Check one reply from ``node`` (default: its source) against the round's broadcast θ and
    the identities seen so far.

    A reply whose identity checks pass binds its node to its partition id and uses the id up
    for this round (a second reply claiming it is rejected), even if it fails a later check.
    """
    node = int(msg.metadata.src_node_id if node is None else node)
    known = identities.node_clients.get(node)
    if msg.has_error():
        return Rejection(node, known, "exception", str(msg.error.reason))
    config = None
    try:
        config = _report_record(msg)
        report = ClientReport.from_config(config)
        if report.declined is None:  # a declining client sends its report alone
            arrays, weight = _content(msg)
    except ReplyError as exc:
        if known is not None:
            return Rejection(node, known, "malformed", f"malformed reply: {exc}")
        return Rejection(node, _claimed(config, identities), "malformed",
                         f"malformed reply: {exc}", claimed=True)
    except Exception as exc:  # noqa: BLE001 - whatever a foreign reply holds is its failure
        return Rejection(node, known, "malformed", f"malformed reply: {exc!r}")
    cid = report.partition_id

    def reject(kind: str, reason: str, client: int | None = cid) -> Rejection:
        return Rejection(node, client, kind, reason, report)

    if cid >= identities.num_clients:
        return reject("identity", f"partition id {cid} outside [0, {identities.num_clients - 1}]",
                      None)
    if known is not None and known != cid:
        return reject("identity", f"node {node} was client {known}, now claims client {cid}",
                      None)
    if cid in identities.seen:
        return reject("identity", f"client {cid} already replied this round", None)
    identities.seen.add(cid)
    identities.node_clients[node] = cid
    if report.declined is not None:
        return reject("declined", report.declined)
    if [a.shape for a in arrays] != [b.shape for b in broadcast]:
        return reject("shape", f"update shapes {[tuple(a.shape) for a in arrays]}")
    if not (all(np.isfinite(a).all() for a in arrays) and math.isfinite(weight)):
        return reject("non-finite", "update or num-examples holds NaN/inf")
    if weight != report.local_examples:
        return reject("malformed", f"num-examples = {weight} is not the declared local-examples "
                      f"({report.local_examples})")
    return AcceptedReply(node, report, list(arrays), weight, msg)
