"""The report's run-level ``central`` block and what Flower's DP building blocks protect against
whom (docs/flower-dp.md).

An app behind one of Flower's DP strategy wrappers has its rounds' ``flower_dp`` metrics in the
store (``strategies/flower_dp.py``): the wrapper, its noise multiplier σ and clipping norm C,
the clients it calibrated its noise to (``num_sampled_clients``), those the strategy sampled
(``m`` of ``N``) and aggregated (``k``), whether the round released an aggregate, and Flower's
own accountant's ε. :func:`central_block` accounts the released rounds with fedpriv's tightest
route (the least of PLD and RDP) against a third party that sees only the aggregate: the
Gaussian mechanism with sensitivity C on the sum and noise std ``σ·C·k/num_sampled_clients``
on it (Flower adds ``σC/num_sampled_clients`` to the mean of ``k`` equally weighted updates),
clients sampled as the strategy sampled them (:mod:`fedpriv.accounting.central`). Against the
server the wrapper's noise protects nothing: the server sees every update before it adds the
noise. :func:`annotate_clients` says so beside every client whose own ε against the server is
unbounded, and warns where ``LocalDpMod``'s ``sensitivity`` is not its clipping norm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fedpriv.accounting.central import central_epsilon, central_sampling
from fedpriv.jsonio import optional_loads

__all__ = ["CLIP_ONLY", "SERVER_NOISE", "annotate_clients", "central_block", "flower_rounds",
           "round_metrics"]

Row = dict[str, Any]
#: ``(round, metrics)`` of completed rounds, each round's ``metrics_json`` parsed once.
RoundMetrics = Sequence[tuple[int, Mapping[str, Any]]]

SERVER_NOISE = ("server-side noise protects nothing against the server: it sees every raw "
                "update before the noise is added to the aggregate (the central epsilon is "
                "against those who see only the aggregate)")
CLIP_ONLY = ("client-side clipping without client-side noise protects nothing against the "
             "server: it sees every clipped update as it is (noise, if any, is added to the "
             "aggregate afterwards)")
ASSUMPTION = ("the aggregate is the mean of the aggregated updates with equal weights, as "
              "Flower's accountant requires (unequal weights give a client more than 1/k of "
              "the mean)")


def round_metrics(rounds: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """``(round, metrics)`` of each ``rounds`` row, its ``metrics_json`` parsed (``{}`` where
    none): the report parses it once and passes it on."""
    return [(int(row["round"]), optional_loads(row.get("metrics_json")) or {}) for row in rounds]


def flower_rounds(metrics: RoundMetrics, key: str) -> list[tuple[int, Any]]:
    """``(round, metrics[key])`` of the completed rounds that recorded ``key``."""
    return [(rnd, values[key]) for rnd, values in metrics if values.get(key) is not None]


def _release(r: Mapping[str, Any]) -> tuple[Any, int, int] | None:
    """The round's Gaussian on the sum, as ``(release, m, N)``; None without a guarantee."""
    from fedpriv.mechanisms.gaussian import GaussianRelease

    aggregated = r.get("aggregated") or r["num_sampled_clients"]
    sigma = float(r["noise_multiplier"]) * aggregated / r["num_sampled_clients"]
    if not sigma > 0 or not math.isfinite(sigma):
        return None
    sampled = int(r.get("sampled") or r["num_sampled_clients"])
    return GaussianRelease(sigma), sampled, int(r["population"])


def central_block(metrics: RoundMetrics, config: Mapping[str, Any]) -> Row | None:
    """The ``central`` block of a run behind Flower's DP wrapper (module docstring), None for
    any other run; ``metrics`` are its completed rounds' (:func:`round_metrics`)."""
    recorded = flower_rounds(metrics, "flower_dp")
    if not recorded:
        return None
    audit = config.get("audit") or {}
    delta = float(audit.get("delta", 1e-5))
    neighbouring = str(audit.get("neighbouring", "add-remove"))
    last_round, last = recorded[-1]
    released = [r for _, r in recorded if r.get("released")]
    samples = [_release(r) for r in released]
    block: Row = {
        "wrapper": last["wrapper"], "noise": last["noise"], "clipping": last["clipping"],
        "adaptive": last["adaptive"],
        "mechanism": f"gaussian: noise added by the server to the aggregate, updates clipped "
                     f"{'adaptively ' if last['adaptive'] else ''}on the {last['clipping']}",
        "noise_multiplier": last["noise_multiplier"], "clipping_norm": last["clipping_norm"],
        "num_sampled_clients": last["num_sampled_clients"],
        "sampling": central_sampling(int(last.get("sampled") or last["num_sampled_clients"]),
                                     int(last["population"])),
        "neighbouring": f"{neighbouring} one client", "releases": len(released),
        "round": last_round, "delta": delta, "accountant": "tightest",
        "against_server": {"epsilon": math.inf, "reason": SERVER_NOISE},
        "assumption": ASSUMPTION,
    }
    unclipped = [(rnd, r["unclipped"]) for rnd, r in recorded
                 if r.get("released") and r.get("unclipped")]
    if any(s is None for s in samples):
        block.update(epsilon=math.inf, route=None, routes=None,
                     reason="a released round had no noise (noise multiplier 0)")
    elif unclipped:
        rnd, count = unclipped[0]
        block.update(epsilon=math.inf, route=None, routes=None, reason=(
            f"client-side clipping not verified: round {rnd} aggregated {count} update(s) not "
            f"declared and verified as clipped to the wrapper's norm (a stock client, or one "
            f"without fixedclipping_mod declared: clients/flower_dp.py), so nothing bounds the "
            f"sensitivity"))
    elif not samples:
        block.update(epsilon=0.0, route=None, routes=None, reason="no aggregate released")
    else:
        result = central_epsilon(samples, delta, neighbouring=neighbouring)  # type: ignore[arg-type]
        block.update(epsilon=result.epsilon, route=result.route, routes=dict(result.routes),
                     reason=None)
    effective = [s[0].noise_multiplier for s in samples if s is not None]
    block["noise_multiplier_effective"] = min(effective) if effective else None
    flower = last.get("flower")
    block["flower"] = flower
    block["flower_epsilon"] = None if flower is None else flower.get("epsilon")
    return block


def _mod_warning(client: Row, mod: Mapping[str, Any]) -> str | None:
    """The warning for a ``LocalDpMod`` whose sensitivity is not its clipping norm."""
    if mod.get("mod") != "LocalDpMod":
        return None
    sensitivity, clip = mod.get("sensitivity"), mod.get("clipping_norm")
    if sensitivity is None or clip is None or math.isclose(sensitivity, clip, rel_tol=1e-12):
        return None
    params = client.get("mechanism_params") or {}
    sigma = params.get("noise_multiplier", mod.get("noise_std", math.nan) / clip)  # as verified
    return (f"LocalDpMod's sensitivity {sensitivity:g} is not its clipping_norm {clip:g}: its "
            f"noise std {mod.get('noise_std', math.nan):.4g} (calibrated to sensitivity "
            f"{sensitivity:g} for its own epsilon {mod.get('epsilon')} per round at delta "
            f"{mod.get('delta')}) over the clip {clip:g} is a noise multiplier {sigma:.4g}: "
            f"epsilon against the server {_number(client.get('epsilon'))} at delta "
            f"{client.get('delta')} over {client.get('releases')} release(s)")


def _number(value: Any) -> str:
    return "unbounded" if value is None or not math.isfinite(value) else f"{value:.4g}"


def annotate_clients(clients: list[Row], metrics: RoundMetrics, central: Row | None) -> None:
    """Add ``flower_mod`` (what the client's Flower mod declared, last), ``epsilon_reason`` (why
    its ε against the server is unbounded, in a run with a DP wrapper or Flower's mods) and
    ``warnings`` to each client entry, in a run with Flower's DP wrapper or mods only."""
    mods: dict[int, Mapping[str, Any]] = {}
    for _, declared in flower_rounds(metrics, "flower_mods"):
        for cid, mod in declared.items():
            mods[int(cid)] = mod
    if central is None and not mods:
        return  # no Flower DP building block in the run: the entries stay as they are
    for client in clients:
        mod = mods.get(client["client_id"])
        client["flower_mod"] = mod
        warning = None if mod is None else _mod_warning(client, mod)
        client["warnings"] = [] if warning is None else [warning]
        epsilon = client.get("epsilon")
        unbounded = epsilon is None or not math.isfinite(epsilon)
        clip_only = (mod or {}).get("mod") == "fixedclipping_mod"
        client["epsilon_reason"] = None
        if unbounded and clip_only:
            client["epsilon_reason"] = CLIP_ONLY
        elif unbounded and central is not None:
            client["epsilon_reason"] = SERVER_NOISE
