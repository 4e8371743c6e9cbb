"""``[strategy]``: the Flower strategy that aggregates, wrapped by the auditing server.

Registered into the run's config (:func:`fedpriv.config.register_section`) when imported.
:data:`CARRIED_SECTIONS` are the application's sections the server passes on unread: a ServerApp
under ``flwr run`` does not import their modules (the server never imports the client or the
application), so it carries them to the clients, which validate ``[[adversary]]`` on receipt;
``fedpriv simulate`` and ``deploy-local`` validate them all before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedpriv.config import Config, register_section
from fedpriv.errors import InputError
from fedpriv.schema import one_of, positive, rule

__all__ = ["CARRIED_SECTIONS", "STRATEGY_PARAMETERS", "WEIGHTINGS", "RegisteredNode",
           "StrategyConfig"]

#: Sections of other parts of the application that the server carries unread.
CARRIED_SECTIONS = ("adversary", "simulation", "sweep")

#: Flower strategy → the ``[strategy]`` parameters it takes (Flower's own defaults when unset).
STRATEGY_PARAMETERS: dict[str, tuple[str, ...]] = {
    "fedavg": (),
    "fedavgm": ("server_learning_rate", "server_momentum"),
    "fedprox": ("proximal_mu",),
    "fedadam": ("eta", "eta_l", "beta_1", "beta_2", "tau"),
    "fedyogi": ("eta", "eta_l", "beta_1", "beta_2", "tau"),
    "fedadagrad": ("eta", "eta_l", "tau"),
    "fedmedian": (),
    "fedtrimmedavg": ("beta",),
    "krum": ("num_malicious_nodes",),
    "multikrum": ("num_malicious_nodes", "num_nodes_to_select"),
    "bulyan": ("num_malicious_nodes",),
}


def _unit_interval(v: Any) -> bool:
    return bool(0 <= v < 1)


#: ``strategy.weighting``: how an aggregation weight follows a size the server cannot verify.
WEIGHTINGS = {
    "capped": "an unverified size counts at most strategy.weight_cap x the round's (lower) "
              "median verified size (of its claimed sizes when none is verified)",
    "median": "an unverified size counts as that median",
}


@dataclass(frozen=True)
class RegisteredNode:
    """One ``[[strategy.nodes]]`` entry: a SuperNode the deployment expects (docs/trust.md).

    Its Flower node id (stable under SuperNode authentication: the SuperLink gives a
    registered public key its node id) is the client ``client``; ``examples`` is its local
    size, when the operator knows it (then a reply declaring another size is inconsistent, and
    the aggregation weight is this size)."""

    node_id: int | None = rule("the Flower node id of an expected SuperNode (an integer)",
                               default=None)
    client: int | None = rule("the client (partition) id the node trains as (an integer >= 0)",
                              lambda v: v >= 0, default=None)
    examples: int | None = rule("the node's local size n (an integer >= 1)", positive,
                                default=None)


@dataclass(frozen=True)
class StrategyConfig:
    """``[strategy]``: the Flower strategy that aggregates, wrapped by the auditing server.

    Every reply is audited before the strategy sees it; rejected replies never reach it.
    Parameters left unset take Flower's defaults; setting one the chosen strategy does not take
    is an error.
    """

    name: str = rule(*one_of(*STRATEGY_PARAMETERS), default="fedavg",
                     doc="The Flower strategy that aggregates the accepted replies.")
    server_learning_rate: float | None = rule("a number > 0", positive, default=None,
                                              doc="fedavgm's server learning rate.")
    server_momentum: float | None = rule("a number in [0, 1)", _unit_interval, default=None,
                                         doc="fedavgm's server momentum.")
    proximal_mu: float | None = rule("a number >= 0", lambda v: v >= 0, default=None,
                                     doc="fedprox's proximal term weight.")
    eta: float | None = rule("a number > 0 (server learning rate)", positive, default=None)
    eta_l: float | None = rule("a number > 0 (client learning rate)", positive, default=None)
    beta_1: float | None = rule("a number in [0, 1)", _unit_interval, default=None,
                                doc="fedadam's and fedyogi's first-moment decay.")
    beta_2: float | None = rule("a number in [0, 1)", _unit_interval, default=None,
                                doc="fedadam's and fedyogi's second-moment decay.")
    tau: float | None = rule("a number > 0 (adaptivity)", positive, default=None)
    beta: float | None = rule("a number in (0, 0.5) (fraction trimmed at each end)",
                              lambda v: 0 < v < 0.5, default=None)
    num_malicious_nodes: int | None = rule("an integer >= 0", lambda v: v >= 0, default=None,
                                           doc="The malicious nodes krum, multikrum and bulyan "
                                               "tolerate.")
    num_nodes_to_select: int | None = rule("an integer >= 1", positive, default=None,
                                           doc="The nodes multikrum averages.")
    join_timeout: float = rule("a number of seconds > 0 to wait for every node before round 1",
                               positive, default=600.0)
    round_timeout: float = rule("a number of seconds > 0 to wait for a round's replies",
                                positive, default=3600.0)
    nodes: list[RegisteredNode] = field(default_factory=list)
    weighting: str = rule(*one_of(*WEIGHTINGS), default="capped",
                          doc="How an aggregation weight follows a size the server cannot "
                              "verify: " + "; ".join(f"{k}, {v}" for k, v in WEIGHTINGS.items())
                              + ".")
    weight_cap: float = rule("a number >= 1: the most an unverified size may count, in units "
                             "of the round's median verified size", lambda v: v >= 1,
                             default=1.0)

    def params(self) -> dict[str, Any]:
        """The chosen strategy's parameters that are set."""
        return {k: getattr(self, k) for k in STRATEGY_PARAMETERS[self.name]
                if getattr(self, k) is not None}

    def check(self) -> None:
        """No parameter is set that the chosen strategy does not take.

        Raises
        ------
        InputError
            Naming ``strategy.<parameter>``.
        """
        own = STRATEGY_PARAMETERS[self.name]
        for params in STRATEGY_PARAMETERS.values():
            for param in params:
                if param not in own and getattr(self, param) is not None:
                    raise InputError(f"strategy.{param}", getattr(self, param),
                                     f"unset: not a parameter of {self.name} (its "
                                     f"parameters: {list(own) or 'none'})")


def check_nodes(nodes: list[RegisteredNode], num_clients: int) -> None:
    """Every ``[[strategy.nodes]]`` entry names its node and a client in range, each node and
    each client once.

    Raises
    ------
    InputError
        Naming ``strategy.nodes[i].<key>``.
    """
    seen_nodes: set[int] = set()
    seen_clients: set[int] = set()
    for i, node in enumerate(nodes):
        key = f"strategy.nodes[{i}]"
        if node.node_id is None or node.node_id in seen_nodes:
            raise InputError(f"{key}.node_id", node.node_id,
                             "the node id of a SuperNode, each node in one entry")
        if node.client is None or not node.client < num_clients or node.client in seen_clients:
            raise InputError(f"{key}.client", node.client,
                             f"a client id in [0, {num_clients - 1}] (data.num_clients), each "
                             "client in one entry")
        seen_nodes.add(node.node_id)
        seen_clients.add(node.client)


def _check(cfg: Config) -> None:
    cfg.strategy.check()
    if cfg.strategy.name == "fedprox" and cfg.audit.release == "steps":
        raise InputError("audit.release", "steps", "'update' with strategy.name = 'fedprox': "
                         "the server recomposes the steps without FedProx's proximal term")
    check_nodes(cfg.strategy.nodes, cfg.data.num_clients)


register_section("strategy", StrategyConfig, check=_check)
