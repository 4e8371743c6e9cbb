"""Adversarial clients, as Flower client mods: fedpriv's own ClientApp, made to misbehave.

``[[adversary]] clients = [...]`` with a ``behaviour`` wraps those clients' train messages in
:func:`adversary_mod` (Flower's ``(msg, context, call_next) -> Message``), which changes what
the client trains with, what each step releases, or what it says, so that the auditor's checks
(privacy-math.md §9), robust aggregation (Krum, trimmed mean) and the run's own robustness can
be tested against clients that cheat. The behaviours, one family per module, are listed in
docs/trust.md §3 with the cheat each one reproduces:

* :mod:`~clients.adversaries.training` — trains otherwise than it declares;
* :mod:`~clients.adversaries.noise` — releases otherwise at each step;
* :mod:`~clients.adversaries.claims` — trains honestly, lies in its reply;
* :mod:`~clients.adversaries.updates` — changes the update it returns;
* :mod:`~clients.adversaries.sensitivity` — breaks per-record sensitivity or cancels noise
  within a round (caught by replay, issue 42).

Honest clients pass through untouched: the mod looks only at its own partition id.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from flwr.app import Context, Message, MessageType

from clients.adversaries import (  # noqa: F401 - registers
    claims,
    noise,
    sensitivity,
    training,
    updates,
)
from clients.adversaries.base import BEHAVIOURS, Turn
from clients.config import AdversaryConfig
from clients.release_hook import RELEASE_HOOK
from fedpriv.config import Config
from fedpriv.protocol import server_config

__all__ = ["BEHAVIOURS", "adversary_mod"]

CallNext = Callable[[Message, Context], Message]


def _adversary(cfg: Config, pid: int) -> AdversaryConfig | None:
    return next((a for a in cfg.adversary if pid in a.clients), None)


def adversary_mod(msg: Message, context: Context, call_next: CallNext) -> Message:
    """The Flower client mod: honest clients pass through, adversaries misbehave."""
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, context)
    config = msg.content.config_records.get("config")
    cfg = Config.from_json(server_config(config, "train"))
    pid = int(context.node_config["partition-id"])
    adversary = _adversary(cfg, pid)
    if adversary is None:
        return call_next(msg, context)
    turn = Turn(msg, context, cfg, pid, int(config["server-round"]), adversary)
    hooks = BEHAVIOURS[adversary.behaviour]
    if hooks.before is not None:
        hooks.before(turn)
    token = None if hooks.release is None else RELEASE_HOOK.set(partial(hooks.release, turn))
    try:
        reply = call_next(msg, context)
    finally:
        if token is not None:
            RELEASE_HOOK.reset(token)
    if reply.has_error() or "arrays" not in reply.content.array_records:
        return reply  # a failure, or a reply declining for the client's budget
    if hooks.after is not None:
        hooks.after(turn, reply)
    return reply
