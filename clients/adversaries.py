"""Adversarial clients, as Flower client mods: fedpriv's own ClientApp, made to misbehave.

``[[adversary]] clients = [...]`` with a ``behaviour`` wraps those clients' train messages in a
mod (Flower's ``(msg, context, call_next) -> Message``) that changes what the client trains with
or what it says, so that the auditor's checks (privacy-math.md §9) and robust aggregation
(Krum, trimmed mean) can be tested against clients that lie:

* ``under-noise`` — trains with the noise scale × ``factor`` (κ / ``factor`` for the VMF),
  declares the configured one;
* ``no-noise`` — trains with clipping alone (``clip``), declares its configured mechanism;
* ``false-sample-rate`` — declares a sampling rate ``factor`` × the true one (the reply schema
  ties q to L/n, so this lie is refused at the boundary; a client that also inflates its declared
  n could not be caught without the ground-truth oracle — docs/reliability.md);
* ``scale-update`` — returns θ + ``factor``·Δ;
* ``malformed`` — drops the declared mechanism's parameters from its report;
* ``replay`` — from round 2 on, returns θ + its first round's update again.

Honest clients pass through untouched: the mod looks only at its own partition id.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

from clients.config import AdversaryConfig
from fedpriv.config import Config
from fedpriv.mechanisms import build_mechanism, release_class
from fedpriv.protocol import CONFIG_KEY, REPORT_RECORD, server_config

__all__ = ["adversary_mod"]

CallNext = Callable[[Message, Context], Message]


def _adversary(cfg: Config, pid: int) -> AdversaryConfig | None:
    return next((a for a in cfg.adversary if pid in a.clients), None)


def _with_mechanism(msg: Message, cfg: Config, pid: int, name: str, params: dict) -> None:
    """Make this client train with ``(name, params)``: an override for it alone, appended to a
    copy of the message's config (strategies share one config record across messages)."""
    raw = cfg.to_dict()
    overrides = raw["mechanism"].get("overrides", [])
    raw["mechanism"]["overrides"] = [*overrides, {"clients": [pid], "name": name, **params}]
    config = ConfigRecord({**msg.content["config"], CONFIG_KEY: json.dumps(raw)})
    msg.content = RecordDict({**msg.content, "config": config})


def _train_differently(msg: Message, cfg: Config, pid: int, adversary: AdversaryConfig) -> None:
    name, params = cfg.mechanism.for_client(pid)
    if adversary.behaviour == "no-noise":
        _with_mechanism(msg, cfg, pid, "clip", {})
        return
    release = release_class(name, "adversary.behaviour")
    key = release.parameter_name
    declared = getattr(build_mechanism(name, params), key)
    factor = adversary.value() if release.more_noise > 0 else 1.0 / adversary.value()
    _with_mechanism(msg, cfg, pid, name, {key: declared * factor})


def _declare(reply: Message, cfg: Config, pid: int) -> None:
    """Rewrite the report to declare the mechanism the configuration gives this client."""
    name, params = cfg.mechanism.for_client(pid)
    mechanism = build_mechanism(name, params)
    report = reply.content[REPORT_RECORD]
    report["mechanism"] = mechanism.name
    report["mechanism-params"] = json.dumps(mechanism.params(), sort_keys=True)


def _arrays(reply: Message) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in reply.content["arrays"].items()}


def _set_arrays(reply: Message, arrays: dict[str, np.ndarray]) -> None:
    reply.content["arrays"] = ArrayRecord({k: Array(v) for k, v in arrays.items()})


def _lie_after(reply: Message, msg: Message, context: Context, adversary: AdversaryConfig) -> None:
    behaviour, factor = adversary.behaviour, adversary.value()
    report = reply.content[REPORT_RECORD]
    if behaviour == "false-sample-rate":
        report["sample-rate"] = float(report["sample-rate"]) * factor
    elif behaviour == "malformed":
        del report["mechanism-params"]
    elif behaviour in ("scale-update", "replay"):
        theta = {k: v.numpy() for k, v in msg.content["arrays"].items()}
        local = _arrays(reply)
        delta = {k: local[k] - theta[k] for k in local}
        if behaviour == "replay":
            delta = _replayed(context, delta)
        else:
            delta = {k: factor * d for k, d in delta.items()}
        _set_arrays(reply, {k: (theta[k] + delta[k]).astype(local[k].dtype) for k in local})


def _replayed(context: Context, delta: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The first round's update, kept in the node's state, every round after."""
    state = context.state
    if "adversary-first-update" not in state.array_records:
        state["adversary-first-update"] = ArrayRecord({k: Array(v) for k, v in delta.items()})
        return delta
    return {k: v.numpy() for k, v in state["adversary-first-update"].items()}


def adversary_mod(msg: Message, context: Context, call_next: CallNext) -> Message:
    """The Flower client mod: honest clients pass through, adversaries misbehave."""
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, context)
    cfg = Config.from_json(server_config(msg.content.config_records.get("config"), "train"))
    pid = int(context.node_config["partition-id"])
    adversary = _adversary(cfg, pid)
    if adversary is None:
        return call_next(msg, context)
    trains_differently = adversary.behaviour in ("under-noise", "no-noise")
    if trains_differently:
        _train_differently(msg, cfg, pid, adversary)
    reply = call_next(msg, context)
    if reply.has_error():
        return reply
    if trains_differently:
        _declare(reply, cfg, pid)
    _lie_after(reply, msg, context, adversary)
    return reply
