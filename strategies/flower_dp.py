"""Flower's own DP building blocks, as the auditor around them sees them (docs/flower-dp.md).

:func:`strategies.audit_strategy` around one of Flower's DP strategy wrappers
(``DifferentialPrivacyServerSideFixedClipping``, ``…ClientSideFixedClipping`` and the adaptive
variants of ``flwr.serverapp.strategy``), in any nesting Flower runs, reads the wrapper's
parameters round by round with a :class:`FlowerDpObserver`: the noise multiplier, the clipping
norm, how many clients the wrapper calibrated its noise to (``num_sampled_clients``) and how many
the strategy sampled and aggregated, and Flower's own accountant's ε when it has one. It also
collects what :mod:`clients.flower_dp` declared beside each reply (``LocalDpMod``'s own
parameters). Both go into the round's metrics in the audit store (``flower_dp``,
``flower_mods``); :mod:`fedpriv.audit.report_central` turns them into the report's run-level
``central`` block and its warnings. The observer never changes a message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from flwr.app import Message
from flwr.serverapp.strategy import Strategy

from fedpriv.protocol import FLOWER_DP_RECORD

__all__ = ["FlowerDpObserver", "clipped_within", "composite_noise", "declared_mod", "dp_wrapper",
           "wrapper_round"]

#: Flower's DP strategy wrappers (``flwr.serverapp.strategy``): where each clips is in its name.
_WRAPPERS = tuple(f"DifferentialPrivacy{side}Side{kind}Clipping"
                  for side in ("Server", "Client") for kind in ("Fixed", "Adaptive"))


def _chain(strategy: Any) -> Iterator[Any]:
    """``strategy`` and every strategy it wraps (Flower's wrappers keep theirs in
    ``strategy``, fedpriv's auditor in ``inner``), outermost first."""
    seen: set[int] = set()
    while strategy is not None and id(strategy) not in seen:
        seen.add(id(strategy))
        yield strategy
        strategy = getattr(strategy, "strategy", None) or getattr(strategy, "inner", None)


def dp_wrapper(strategy: Strategy) -> Any | None:
    """The outermost of Flower's DP strategy wrappers in ``strategy``'s chain, or None."""
    from flwr.serverapp import strategy as flower

    classes = tuple(getattr(flower, name) for name in _WRAPPERS)
    return next((s for s in _chain(strategy) if isinstance(s, classes)), None)


def composite_noise(wrapper: Any) -> float:
    """The noise multiplier the wrapper's releases are accounted at. Fixed clipping: its own.
    Adaptive clipping (Andrew et al. 2021) splits the user's σ between the update
    (``noise_multiplier``, which Flower overwrites with the update's share) and the noisy
    clipped-count bits (``clipped_count_stddev``): ``σ = (σ_Δ⁻² + (2σ_b)⁻²)^(−1/2)``; with
    either at 0 there is no guarantee (0)."""
    sigma = float(wrapper.noise_multiplier)
    count = getattr(wrapper, "clipped_count_stddev", None)
    if count is None:
        return sigma
    if sigma <= 0 or count <= 0:
        return 0.0
    return float((sigma ** -2 + (2.0 * count) ** -2) ** -0.5)


def wrapper_round(wrapper: Any, *, sampled: int, population: int, aggregated: int | None,
                  released: bool, delta: float) -> dict[str, Any]:
    """One round of ``wrapper`` as the store keeps it (``rounds.metrics_json["flower_dp"]``)."""
    name = type(wrapper).__name__
    base = next(n for n in _WRAPPERS if isinstance(wrapper, _flower_class(n)))
    out: dict[str, Any] = {
        "wrapper": name, "noise": "server",
        "clipping": "client" if "ClientSide" in base else "server",
        "adaptive": "Adaptive" in base, "noise_multiplier": composite_noise(wrapper),
        "clipping_norm": float(wrapper.clipping_norm),
        "num_sampled_clients": int(wrapper.num_sampled_clients),
        "sampled": sampled, "population": population, "aggregated": aggregated,
        "released": released, "flower": None,
    }
    accountant = getattr(wrapper, "accountant", None)
    if accountant is not None:
        spent = accountant.get_privacy_spent(delta) if accountant.num_releases else None
        config = accountant.config
        out["flower"] = {
            "accountant": type(accountant).__name__,
            "epsilon": 0.0 if spent is None else float(spent.epsilon), "delta": delta,
            "releases": int(accountant.num_releases),
            "method": None if spent is None else spent.accounting_method,
            "sampling": config.sampling_method.value,
            "neighbouring": config.neighboring_relation.value,
            "population": int(config.population_size),
            "max_epsilon": config.max_epsilon,
        }
    return out


def _flower_class(name: str) -> type:
    from flwr.serverapp import strategy as flower

    return getattr(flower, name)


_MODS = ("LocalDpMod", "fixedclipping_mod")
_STATED = ("clipping_norm", "sensitivity", "epsilon", "delta", "noise_std")


def declared_mod(reply: Message) -> dict[str, Any] | None:
    """What :mod:`clients.flower_dp` declared of Flower's client mod beside a reply (its
    ``flower-dp`` ConfigRecord: the mod's name and its finite numeric parameters, nothing
    else a client may put there), or None."""
    if reply.has_error():
        return None
    record = reply.content.config_records.get(FLOWER_DP_RECORD)
    if record is None or record.get("mod") not in _MODS:
        return None
    out: dict[str, Any] = {"mod": record["mod"]}
    for key in _STATED:
        value = record.get(key)
        if (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(float(value))):
            out[key] = float(value)
    return out


class FlowerDpObserver:
    """Reads Flower's DP wrapper around (or inside) the audited strategy and the client mods'
    declarations, round by round (module docstring); stateless between rounds but for what
    the current round has seen."""

    def __init__(self, strategy: Strategy, num_clients: int, delta: float) -> None:
        self.wrapper = dp_wrapper(strategy)
        self.num_clients, self.delta = num_clients, delta
        self._released: dict[int, bool] = {}
        self._mods: dict[int, dict[int, dict[str, Any]]] = {}  # round -> node -> declaration

    def replied(self, server_round: int, replies: Iterable[Message]) -> None:
        """Keep what the round's replies declared of Flower's client mods."""
        found = {r.metadata.src_node_id: d for r in replies
                 if (d := declared_mod(r)) is not None}
        if found:
            self._mods[server_round] = found

    def aggregated(self, server_round: int, released: bool) -> None:
        """Whether the round released an aggregate (a round with none adds no noise)."""
        self._released[server_round] = released

    def round_metrics(self, server_round: int, *, node_clients: dict[int, int], sampled: int,
                      updates: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The round's ``flower_dp`` and ``flower_mods`` metrics (empty: nothing to say):
        ``sampled`` clients were sent a train message; ``updates`` are the round's rows in the
        audit store (None: not audited), of which those ``ok`` or ``undeclared`` reached the
        aggregation."""
        out: dict[str, Any] = {}
        released = self._released.pop(server_round, False)
        if self.wrapper is not None:
            aggregated = None if updates is None else [
                u for u in updates if u["status"] in ("ok", "undeclared")]
            out["flower_dp"] = wrapper_round(
                self.wrapper, sampled=sampled, population=self.num_clients,
                aggregated=None if aggregated is None else len(aggregated), released=released,
                delta=self.delta)
            if out["flower_dp"]["clipping"] == "client":
                out["flower_dp"]["unclipped"] = None if aggregated is None else sum(
                    not clipped_within(u, float(self.wrapper.clipping_norm)) for u in aggregated)
        mods = self._mods.pop(server_round, {})
        if mods:
            out["flower_mods"] = {str(node_clients[node]): d for node, d in sorted(mods.items())
                                  if node in node_clients}
        return out


def clipped_within(update: dict[str, Any], clip: float) -> bool:
    """Whether an aggregated update's clipping to ``clip`` was verified: a consistent
    client-level release declared at a clip no larger (its norm tested against it)."""
    if update["status"] != "ok" or update["mechanism"] != "client-gaussian":
        return False
    params = json.loads(update["mechanism_params_json"] or "{}")
    declared = params.get("clip")
    return isinstance(declared, (int, float)) and declared <= clip * (1 + 1e-9)
