"""The server's boundary: one train reply in, an accepted reply or a named rejection out.

:func:`check_reply` is pure (no store, no ledger): it reads the reply's
:class:`~fedpriv.protocol.ClientReport` once and checks everything the server can check without
statistics — the message shape Flower's aggregation needs, the report's fields, the client's
identity (a partition id in range, not already used this round, the one the server knows its
node to be — :mod:`strategies.identity` — else the one its node claimed before), the update's
names, shapes, dtypes and finiteness, the aggregation weight and the protocol's metrics
(:data:`TRAIN_METRICS`: finite numbers where present). Whatever fails becomes a
:class:`Rejection` with a kind and a reason; it never raises, so a faulty or malicious client is
one recorded failure and the round goes on. Once the round's replies are checked,
:func:`conform` gives the accepted ones one schema (record names, the metrics they all share),
so that no reply can make the inner strategy refuse the round. A client that declined to train
(its ε budget, ``ClientReport.declined``) sends its report alone; once its identity checks pass
it is a :class:`Rejection` of kind ``declined`` — nothing to aggregate, not a fault.

A reply without a report (no ``meta`` ConfigRecord: a stock Flower ClientApp, such as Flower's
quickstart-pytorch) is *undeclared*: it claims no partition id, so its node gets a client id of
its own, :meth:`RoundIdentities.undeclared_id` — the server's bookkeeping, not verified and not
a partition id. Its update must still conform to the broadcast (names, shapes, dtypes) and carry
``num-examples``; then it is accepted (``AcceptedReply.report`` is None) or, with
``audit.undeclared = "refuse"``, a :class:`Rejection` of kind ``undeclared``. Failure messages
are one readable line (:func:`fedpriv.failures.failure_line`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from flwr.app import ArrayRecord, Message, MetricRecord

from fedpriv.failures import failure_line
from fedpriv.protocol import (
    MAX_NUM_EXAMPLES,
    REPORT_RECORD,
    STEPS_RECORD,
    ClientReport,
    ReplyError,
    finite_number,
    reply_int,
)
from strategies.step_releases import read_steps

__all__ = [
    "TRAIN_METRICS",
    "UNDECLARED",
    "WEIGHT_METRIC",
    "AcceptedReply",
    "Rejection",
    "RoundIdentities",
    "check_reply",
    "conform",
]

#: The MetricRecord key of the aggregation weight (Flower's ``weighted_by_key``): an integer in
#: [1, :data:`~fedpriv.protocol.MAX_NUM_EXAMPLES`] in every reply, a stock client's included.
WEIGHT_METRIC = "num-examples"
#: The train metrics the protocol knows (docs/protocol.md): the weight, then the loss as
#: fedpriv's ClientApp and as Flower's templates name it. Each loss must be a finite number
#: where present; other keys are dropped before aggregation (:func:`conform`).
TRAIN_METRICS = (WEIGHT_METRIC, "train-loss", "train_loss")

#: Why an undeclared reply has no guarantee (the store's ``error`` of a refused one, the
#: verification's reason of an accepted one).
UNDECLARED = (f"undeclared reply: no {REPORT_RECORD!r} ConfigRecord (fedpriv's client report, "
              "docs/protocol.md), so nothing bounds its privacy")


@dataclass(frozen=True)
class AcceptedReply:
    """A well-formed reply: its report (None for an undeclared reply), the client's new
    parameters and its FedAvg weight."""

    node_id: int
    client_id: int
    report: ClientReport | None
    arrays: list[np.ndarray]
    weight: float
    message: Message
    releases: np.ndarray | None = None  # (k, p) step releases, in steps mode


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
    """Who is who: partition ids seen this round, and each node's partition id so far. With
    ``known`` (node → client as the server knows it: the simulation engine or
    ``[[strategy.nodes]]``, :mod:`strategies.identity`) a node it does not hold is not of this
    federation, and a report claiming another client than its node's is an ``identity``
    failure of its node's client, whoever replied first. Undeclared replies claim nothing:
    their ids stay the server's bookkeeping (:meth:`undeclared_id`)."""

    num_clients: int
    node_clients: dict[int, int]
    seen: set[int]
    next_undeclared: int = 0  # the id the next new undeclared node gets
    known: Mapping[int, int] | None = None

    @classmethod
    def start(cls, num_clients: int, node_clients: dict[int, int],
              known: Mapping[int, int] | None = None) -> RoundIdentities:
        return cls(num_clients, node_clients, set(),
                   max([num_clients - 1, *node_clients.values()]) + 1, known)

    def undeclared_id(self, node: int) -> int:
        """The client id of a node that sent no report: the one it had (a partition id it
        claimed before, or the id given at its first undeclared reply), else the next id from
        ``num_clients`` up, so it never collides with a partition id a declared client may
        claim. Stable for the run (``--resume`` rebuilds it from the store); nothing verifies
        that the node is the same party from round to round."""
        if node not in self.node_clients:
            self.node_clients[node] = self.next_undeclared
            self.next_undeclared += 1
        return self.node_clients[node]


def _content(
    msg: Message, names: Sequence[str] | None, steps: bool = False,
) -> tuple[Sequence[np.ndarray], int, tuple[list[str], ArrayRecord] | None]:
    """The update, its weight and, with ``steps`` (steps mode), the update's names and the
    step releases' record, unread; ReplyError when the records are not one ArrayRecord
    (named as broadcast, when ``names`` is given) — plus the step releases' in steps mode —
    and one MetricRecord with ``num-examples`` an integer in [1, 2⁶³ − 1] (what Flower's
    aggregation reads and the store keeps: nothing larger reaches either) and finite losses."""
    content = msg.content  # each *_records property builds a new dict: read each once
    array_records, metric_records = content.array_records, content.metric_records
    stepped = array_records.pop(STEPS_RECORD, None) if steps else None
    if steps and stepped is None:
        raise ReplyError(STEPS_RECORD, None, "an ArrayRecord of every step's release "
                         "(audit.release = 'steps')")
    if len(array_records) != 1 or len(metric_records) != 1:
        raise ReplyError("content", "records", "exactly one ArrayRecord and one MetricRecord")
    metrics = next(iter(metric_records.values()))
    weight = reply_int(WEIGHT_METRIC, metrics.get(WEIGHT_METRIC), 1, MAX_NUM_EXAMPLES)
    for key in TRAIN_METRICS[1:]:
        value = metrics.get(key)
        if value is not None and finite_number(value) is None:
            raise ReplyError(key, value, "a finite number")
    record = next(iter(array_records.values()))
    if names is not None and list(record.keys()) != list(names):
        raise ReplyError("arrays", list(record.keys()), f"the broadcast's names {list(names)}")
    named_steps = None if stepped is None else (list(record.keys()), stepped)
    return record.to_numpy_ndarrays(), weight, named_steps


def conform(accepted: Sequence[AcceptedReply]) -> list[Message]:
    """The accepted replies as the inner strategy aggregates them: each message's one
    ArrayRecord under ``"arrays"`` and one MetricRecord under ``"metrics"`` holding only the
    :data:`TRAIN_METRICS` that every accepted reply of the round carries (``num-examples``
    always; a loss only when every reply reports it under the same key). Flower's strategies
    refuse a round whose replies differ in record names or metric keys ("All MetricRecords must
    have the same keys"), so without this one reply with an extra or a missing metric would
    veto everyone's update; other metric keys (a stock client's own) are dropped, not
    averaged. The messages are changed in place (their ConfigRecords are kept)."""
    contents = [reply.message.content for reply in accepted]
    metrics = [next(iter(c.metric_records.values())) for c in contents]
    shared = [key for key in TRAIN_METRICS if all(key in m for m in metrics)]
    for content, values in zip(contents, metrics, strict=True):
        (array_key, arrays), = content.array_records.items()
        metric_key = next(iter(content.metric_records))
        del content[array_key]
        del content[metric_key]
        content["arrays"] = arrays
        content["metrics"] = MetricRecord({key: values[key] for key in shared})
    return [reply.message for reply in accepted]


def _conformance(
    arrays: Sequence[np.ndarray], broadcast: Sequence[np.ndarray]
) -> tuple[str, str] | None:
    """``(kind, reason)`` when the update does not have the broadcast's shapes and dtypes."""
    if [a.shape for a in arrays] != [b.shape for b in broadcast]:
        return "shape", f"update shapes {[tuple(a.shape) for a in arrays]}"
    if [a.dtype for a in arrays] != [b.dtype for b in broadcast]:
        return "malformed", (f"malformed reply: update dtypes {[str(a.dtype) for a in arrays]} "
                             f"are not the broadcast's {[str(b.dtype) for b in broadcast]}")
    return None


def _claimed(config: Mapping | None, identities: RoundIdentities) -> int | None:
    """The partition id a malformed report claims, to name the failure — only if it is a
    plausible id not yet used this round (the claim binds nothing)."""
    claim = None if config is None else config.get("partition-id")
    ok = isinstance(claim, int) and not isinstance(claim, bool)
    ok = ok and 0 <= claim < identities.num_clients and claim not in identities.seen
    return claim if ok else None


def check_reply(
    msg: Message, broadcast: Sequence[np.ndarray], identities: RoundIdentities,
    node: int | None = None, *, names: Sequence[str] | None = None,
    undeclared: str = "aggregate", steps: bool = False,
) -> AcceptedReply | Rejection:
    """Check one reply from ``node`` (default: its source) against the round's broadcast θ
    (its array ``names``, when given) and the identities seen so far; ``undeclared``
    (``audit.undeclared``) says whether a reply without a report is accepted or refused;
    ``steps`` (``audit.release = "steps"``) that a declared reply carries its step releases
    (:func:`strategies.step_releases.read_steps`).

    A reply whose identity checks pass binds its node to its partition id and uses the id up
    for this round (a second reply claiming it is rejected), even if it fails a later check.
    """
    node = int(msg.metadata.src_node_id if node is None else node)
    known = identities.node_clients.get(node)
    if msg.has_error():
        return Rejection(node, known, "exception", failure_line(str(msg.error.reason)))
    truth = None if identities.known is None else identities.known.get(node)
    if identities.known is not None and truth is None:
        return Rejection(node, None, "identity", f"node {node} is not a node of this "
                         "federation (the simulation engine's, or [[strategy.nodes]])")
    if REPORT_RECORD not in msg.content.config_records:
        return _undeclared(msg, broadcast, identities, node, names, undeclared)
    config = None
    try:
        config = msg.content.config_records[REPORT_RECORD]
        report = ClientReport.from_config(config)
        if report.declined is None:  # a declining client sends its report alone
            arrays, weight, stepped = _content(msg, names, steps and not report.client_level)
    except ReplyError as exc:
        if known is not None:
            return Rejection(node, known, "malformed", f"malformed reply: {exc}")
        return Rejection(node, _claimed(config, identities), "malformed",
                         f"malformed reply: {exc}", claimed=True)
    except Exception as exc:  # noqa: BLE001 - whatever a foreign reply holds is its failure
        return Rejection(node, known, "malformed",
                         f"malformed reply: {failure_line(f'{type(exc).__name__}: {exc}')}")
    cid = report.partition_id

    def reject(kind: str, reason: str, client: int | None = cid) -> Rejection:
        return Rejection(node, client, kind, reason, report)

    if cid >= identities.num_clients:
        return reject("identity", f"partition id {cid} outside [0, {identities.num_clients - 1}]",
                      known)
    if truth is not None and truth != cid:  # the thief's own client fails, not the claimed one
        return reject("identity", f"node {node} is client {truth}, but claims client {cid}",
                      truth)
    if known is not None and known != cid:
        return reject("identity", f"node {node} was client {known}, now claims client {cid}",
                      known)
    if cid in identities.seen:
        return reject("identity", f"client {cid} already replied this round", known)
    identities.seen.add(cid)
    identities.node_clients[node] = cid
    if report.declined is not None:
        return reject("declined", report.declined)
    bad = _conformance(arrays, broadcast)
    if bad is not None:
        return reject(*bad)
    if not all(np.isfinite(a).all() for a in arrays):
        return reject("non-finite", "update holds NaN/inf")
    if weight != report.local_examples:
        return reject("malformed", f"num-examples = {weight} is not the declared local-examples "
                      f"({report.local_examples})")
    releases = None if stepped is None else read_steps(stepped[1], stepped[0], broadcast,
                                                       report.local_steps)
    if isinstance(releases, tuple):
        return reject(*releases)
    return AcceptedReply(node, cid, report, list(arrays), weight, msg, releases)


def _undeclared(
    msg: Message, broadcast: Sequence[np.ndarray], identities: RoundIdentities, node: int,
    names: Sequence[str] | None, policy: str,
) -> AcceptedReply | Rejection:
    """A reply without a report: the client id of its node (:meth:`RoundIdentities.
    undeclared_id`), then the same conformance as any update, then ``policy``."""
    cid = identities.undeclared_id(node)
    if cid in identities.seen:
        return Rejection(node, cid, "identity", f"client {cid} already replied this round")
    identities.seen.add(cid)
    try:
        arrays, weight, _ = _content(msg, names)
    except ReplyError as exc:
        return Rejection(node, cid, "malformed", f"malformed reply: {exc}")
    except Exception as exc:  # noqa: BLE001 - whatever a foreign reply holds is its failure
        return Rejection(node, cid, "malformed",
                         f"malformed reply: {failure_line(f'{type(exc).__name__}: {exc}')}")
    bad = _conformance(arrays, broadcast)
    if bad is not None:
        return Rejection(node, cid, *bad)
    if not all(np.isfinite(a).all() for a in arrays):
        return Rejection(node, cid, "non-finite", "update holds NaN/inf")
    if policy == "refuse":
        return Rejection(node, cid, "undeclared", f"{UNDECLARED}; audit.undeclared = 'refuse'")
    return AcceptedReply(node, cid, None, list(arrays), weight, msg)
