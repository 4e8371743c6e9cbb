"""Who each node is, and how much its update weighs: from what the server knows, not from claims.

A reply's report names a partition id; a node could name another client's. The server binds
node ↔ client from what it knows (:func:`node_binding`), in this order:

* **the simulation engine** — Flower's simulation registers its nodes and gives node ``i`` (in
  registration order) the node config ``partition-id = i`` (``flwr/server/superlink/fleet/vce/
  vce_api.py``, ``_register_nodes``); :func:`engine_partitions` reads that order back from the
  in-memory link state the ServerApp shares with the engine. An in-process grid may state its
  nodes' partitions itself (a ``node_partitions`` mapping, as
  ``workflows.local_grid.LocalGrid`` does). The server also computes every partition's size
  (it holds the data set and the partition function), so a declared local size is checked too —
  a client-level client's as a record-level one's.
* **the registry** — ``[[strategy.nodes]]`` in the run's config: node id → client, and its
  local size when the operator knows it (a deployment; node ids are stable under SuperNode
  authentication).
* **first claim** — neither: a node is the client it first claims to be, and stays so for the
  run. Labelled ``first-claim (unverified)``: a node replying first may claim another client.

Aggregation weights (:func:`aggregation_weights`) follow only what the server knows: a
server-known size is the weight (a declared size that differs is ``inconsistent`` and never
aggregated); an unverified size (no engine table, no ``[[strategy.nodes]]`` size, or a stock
client's ``num-examples``) counts at most the round's lower median *verified* size — of its
claimed sizes when none is verified — times ``strategy.weight_cap`` (1 by default;
``"capped"``), or exactly that median (``"median"``), so that no reply declaring n = 10⁹ makes
the global update its own: it weighs as a median client. :func:`weigh_replies` also says what
share of the round's aggregate weight came from unverified sizes (the store's round metrics,
``report.json → unverified_share``).
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from flwr.serverapp import Grid

from fedpriv.config import Config
from fedpriv.data import Dataset, client_sizes
from fedpriv.failures import FirstSeen, log_first
from fedpriv.instructions import (
    SettingsVerdicts,
    instructed_report,
    settings_key,
    size_verdict,
)
from fedpriv.protocol import ClientReport
from fedpriv.verification import Verdict
from strategies.replies import AcceptedReply

__all__ = ["ENGINE", "FIRST_CLAIM", "REGISTRY", "KnownChecks", "NodeBinding", "aggregation_weights",
           "engine_partitions", "node_binding", "partition_sizes",
           "unverified_share", "weigh_replies"]

log = logging.getLogger(__name__)

ENGINE = "simulation engine"
REGISTRY = "strategy.nodes"
FIRST_CLAIM = "first-claim (unverified)"


@dataclass(frozen=True)
class NodeBinding:
    """Node id → client id as the server knows it (empty with first-claim binding), each
    client's server-known local size, and where both come from (:data:`ENGINE`,
    :data:`REGISTRY` or :data:`FIRST_CLAIM`)."""

    clients: Mapping[int, int] = field(default_factory=dict)
    sizes: Mapping[int, int] = field(default_factory=dict)
    source: str = FIRST_CLAIM

    @property
    def bound(self) -> bool:
        """Whether the server knows every node's client (a node it does not know is refused)."""
        return self.source != FIRST_CLAIM

    def identity_verdict(self, node: int, client: int) -> Verdict:
        """Test ``identity`` of an accepted reply: ``consistent`` when the server bound the node
        to this client, ``unverifiable`` under first-claim binding."""
        if not self.bound:
            return Verdict("identity", "unverifiable", f"identity: {FIRST_CLAIM}: node {node} "
                           f"is client {client} because it first claimed so (no "
                           "[[strategy.nodes]] registry)", speaks_to=("identity",))
        # no node id in the reason: a simulation draws new ones every run, and a resumed run's
        # verdicts equal an uninterrupted run's (the updates row keeps the node id)
        return Verdict("identity", "consistent", f"the node is client {client} by the "
                       f"{self.source}", p_value=1.0, speaks_to=("identity",))


def engine_partitions(grid: Grid) -> dict[int, int] | None:
    """Node id → partition id as the simulation engine assigned them, or None when ``grid`` is
    not a simulation's (a deployment's grid: the server cannot know).

    A grid with a ``node_partitions`` mapping states it; Flower's ``InMemoryGrid`` shares the
    engine's in-memory link state, whose node table keeps registration order — the order in
    which the engine numbered the partitions (Flower 1.42, ``_register_nodes``)."""
    stated = getattr(grid, "node_partitions", None)
    if stated is not None:
        return {int(node): int(pid) for node, pid in stated.items()}
    from flwr.superlink.grid import InMemoryGrid

    nodes = getattr(getattr(grid, "state", None), "nodes", None)
    if not isinstance(grid, InMemoryGrid) or not isinstance(nodes, dict):
        return None
    return {int(node): i for i, node in enumerate(nodes)}


def partition_sizes(cfg: Config, dataset: Dataset) -> list[int]:
    """Every client's local size, as the ClientApp's partition gives it
    (``clients/local_data.py``: the same function on the same data and seed)."""
    return client_sizes(cfg.data, dataset.train_y.numpy(), cfg.seed)


def node_binding(grid: Grid, cfg: Config, dataset: Dataset | None) -> NodeBinding:
    """The run's :class:`NodeBinding`: the engine's (with the partition sizes the server
    computes from ``dataset``), else ``[[strategy.nodes]]``, else first claim."""
    engine = engine_partitions(grid)
    if engine is not None and len(engine) == cfg.data.num_clients:
        if cfg.strategy.nodes:
            log.warning("[[strategy.nodes]] is not read in a simulation: its engine binds nodes")
        sizes = {} if dataset is None else dict(enumerate(partition_sizes(cfg, dataset)))
        return NodeBinding(engine, sizes, ENGINE)
    if engine is not None:
        log.warning("the simulation engine has %d nodes, data.num_clients is %d: binding "
                    "nodes by their first claim", len(engine), cfg.data.num_clients)
    nodes = cfg.strategy.nodes
    if nodes:
        return NodeBinding({n.node_id: n.client for n in nodes},
                           {n.client: n.examples for n in nodes if n.examples is not None},
                           REGISTRY)
    return NodeBinding()


def aggregation_weights(
    declared: Sequence[float], known: Sequence[int | None], weighting: str, cap: float,
) -> list[float]:
    """Each accepted reply's aggregation weight.

    Parameters
    ----------
    declared
        Each reply's ``num-examples``, as it claims.
    known
        Each reply's server-known size, or None where the server knows none (unverified).
    weighting
        ``strategy.weighting``: ``"capped"`` or ``"median"``.
    cap
        ``strategy.weight_cap`` (>= 1).

    Returns
    -------
    list of float
        A server-known size where there is one; else, under ``"capped"``, the claim but at
        most ``cap`` × the round's lower median verified size (the lower median of the claims
        when no size of the round is verified), under ``"median"`` that median. The lower
        median: of two sizes, the smaller, so that one of two claims cannot lift the cap.
    """
    if not declared:
        return []
    verified = [float(k) for k in known if k is not None]
    median = statistics.median_low(verified or [float(d) for d in declared])
    out = []
    for size, k in zip(declared, known, strict=True):
        if k is not None:
            out.append(float(k))
        elif weighting == "median":
            out.append(median)
        else:
            out.append(min(float(size), cap * median))
    return out


def unverified_share(weights: Sequence[float], known: Sequence[int | None]) -> float | None:
    """The share of a round's aggregate weight that came from unverified sizes.

    Parameters
    ----------
    weights
        The round's aggregation weights (:func:`aggregation_weights`).
    known
        Each reply's server-known size, or None (unverified).

    Returns
    -------
    float or None
        Σ unverified weights / Σ weights, in [0, 1]; None for a round with no accepted reply.
    """
    total = sum(weights)
    if not total:
        return None
    return sum(w for w, k in zip(weights, known, strict=True) if k is None) / total


class KnownChecks:
    """What the server checks of a round's declared replies against what it knows — the
    preconditions of each client-round verdict: ``settings`` (the report its instructions
    give, :func:`fedpriv.instructions.instructed_report`, at the server-known size where it
    has one; only when ``cfg`` is the config the server sent), ``size-sampling`` and
    ``identity``. What replies share is computed once (issue 37): the server's instructions
    per distinct set of ``[[mechanism.overrides]]`` naming the client (they decide its
    mechanism and budget: ``MechanismConfig.for_client``, ``budget_for``), the settings
    verdict per distinct instructions and declared settings
    (:class:`~fedpriv.instructions.SettingsVerdicts`), the size verdict per distinct known
    and declared size; the identity verdict is each reply's own."""

    def __init__(self, cfg: Config | None, binding: NodeBinding, server_round: int) -> None:
        self.cfg, self.binding, self.server_round = cfg, binding, server_round
        self._sent: dict[tuple[int, ...], tuple[ClientReport, tuple]] = {}
        self._settings = SettingsVerdicts()
        self._sizes: dict[tuple[int | None, int], Verdict] = {}

    def _instructions(self, cfg: Config, cid: int, size: int) -> tuple[ClientReport, tuple]:
        """The report the server's instructions give client ``cid`` and its
        :func:`~fedpriv.instructions.settings_key`, kept per set of overrides naming it (its
        local size and id are no setting: :func:`~fedpriv.instructions.settings_differences`)."""
        naming = tuple(i for i, o in enumerate(cfg.mechanism.overrides) if cid in o["clients"])
        kept = self._sent.get(naming)
        if kept is None:
            sent = instructed_report(cfg, cid, self.server_round, size)
            kept = self._sent[naming] = (sent, settings_key(sent))
        return kept

    def __call__(self, node: int, report: ClientReport) -> list[Verdict]:
        """The checks of one reply of the round: ``settings`` (with a config),
        ``size-sampling`` and ``identity``."""
        cid = report.partition_id
        known = self.binding.sizes.get(cid)  # client-level too: its n is its aggregation weight
        checks = []
        if self.cfg is not None:
            sent, key = self._instructions(self.cfg, cid, report.local_examples
                                           if known is None else known)
            checks.append(self._settings(sent, report, key))
        size = self._sizes.get((known, report.local_examples))
        if size is None:
            size = self._sizes[known, report.local_examples] = size_verdict(
                known, report, f"the {self.binding.source}")
        checks.append(size)
        checks.append(self.binding.identity_verdict(node, cid))
        return checks


def weigh_replies(
    rnd: int, replies: list[AcceptedReply], binding: NodeBinding,
    weighting: tuple[str, float], logged: FirstSeen | None = None,
) -> tuple[list[AcceptedReply], float | None]:
    """Each reply with its aggregation weight (``num-examples``, which Flower's strategies
    read) set by the weighting policy (:func:`aggregation_weights`): a server-known size, or
    an unverified one capped; and the share of the round's weight that came from unverified
    sizes (:func:`unverified_share`). A changed weight is written into the reply's
    MetricRecord. A stock client's size is never verified: it declared no client. A changed
    weight is logged in the first round it occurs for a client (``logged``), not every round."""
    known = [None if r.report is None else binding.sizes.get(r.client_id) for r in replies]
    weights = aggregation_weights([r.weight for r in replies], known, *weighting)
    out = []
    for reply, weight in zip(replies, weights, strict=True):
        if weight != reply.weight:
            log_first(log, FirstSeen() if logged is None else logged, reply.client_id,
                      "weight", f"num-examples = {reply.weight:g}",
                      "round %d client %d: aggregation weight %g for the unverified "
                      "num-examples = %g (strategy.weighting = %r)", rnd, reply.client_id,
                      weight, reply.weight, weighting[0])
            (metrics,) = reply.message.content.metric_records.values()
            metrics["num-examples"] = weight
            reply = dataclasses.replace(reply, weight=weight)
        out.append(reply)
    return out, unverified_share(weights, known)
