"""What every adversarial behaviour shares: its turn, its registry, and the message edits.

A behaviour (:class:`Behaviour`) has up to three hooks, each optional:

* ``before(turn)`` — change what the client trains with (a copy of the message's config);
* ``release(turn, mechanism)`` — a stand-in for the mechanism local training privatises with
  (:mod:`clients.release_hook`), to change what each step releases;
* ``after(turn, reply)`` — change what the client says (its report, metrics or arrays).

Behaviours register by name (:func:`behaviour`); :data:`clients.config.ADVERSARY_BEHAVIOURS`
says what each one's ``factor`` allows, and a test checks both name the same behaviours.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict

from clients.config import AdversaryConfig
from fedpriv.config import Config
from fedpriv.mechanisms import Mechanism, build_mechanism, release_class
from fedpriv.protocol import CONFIG_KEY, REPORT_RECORD
from fedpriv.seeding import client_noise_seed

__all__ = ["BEHAVIOURS", "Behaviour", "Turn", "arrays_of", "behaviour", "declare_configured",
           "delta_of", "noise_key", "set_arrays", "with_config", "with_update"]


_NODE_SECRET = "adversary-noise-secret"


@dataclass(frozen=True)
class Turn:
    """One train message to an adversary: the configuration the server sent (``cfg``, before
    any change), who the client is, the round and its ``[[adversary]]`` table."""

    msg: Message
    context: Context
    cfg: Config
    pid: int
    round: int
    adversary: AdversaryConfig

    @property
    def factor(self) -> float | None:
        """The behaviour's factor (:meth:`clients.config.AdversaryConfig.value`)."""
        return self.adversary.value()

    @property
    def noise_seed(self) -> int:
        """The seed of the noise a behaviour draws in place of the honest noise: the run's seed
        when the node opts in to it, as the honest client does
        (:func:`fedpriv.seeding.client_noise_seed`), else a secret of this node's, drawn once
        from the operating system and kept in its state, so that a behaviour can repeat its
        noise across rounds (``reuse-noise``) without the server being able to re-draw it."""
        seed = client_noise_seed(self.cfg.seed, self.context.node_config)
        if seed is not None:
            return seed
        state = self.context.state
        if _NODE_SECRET not in state.config_records:
            state[_NODE_SECRET] = ConfigRecord({"seed": secrets.randbits(63)})
        return int(state.config_records[_NODE_SECRET]["seed"])


@dataclass(frozen=True)
class Behaviour:
    """One adversarial behaviour's hooks (module docstring)."""

    before: Callable[[Turn], None] | None = None
    release: Callable[[Turn, Mechanism], Any] | None = None
    after: Callable[[Turn, Message], None] | None = None


BEHAVIOURS: dict[str, Behaviour] = {}
"""Behaviour name → its hooks, filled as the behaviour modules are imported."""


def behaviour(name: str, **hooks: Any) -> None:
    """Register behaviour ``name`` with its hooks."""
    if name in BEHAVIOURS:
        raise TypeError(f"two adversarial behaviours named {name!r}")
    BEHAVIOURS[name] = Behaviour(**hooks)


def noise_key(name: str) -> tuple[str, bool]:
    """The mechanism's noise parameter and whether a larger value adds more noise (σ, λ) or
    less (the VMF's κ)."""
    release = release_class(name, "adversary.behaviour")
    return release.parameter_name, release.more_noise > 0


def with_config(turn: Turn, edit: Callable[[dict], None]) -> None:
    """Make the client train with ``edit`` applied to a copy of the run's config (strategies
    share one config record across messages: the message gets a config record of its own)."""
    raw = turn.cfg.to_dict()
    edit(raw)
    msg = turn.msg
    config = ConfigRecord({**msg.content["config"], CONFIG_KEY: json.dumps(raw)})
    msg.content = RecordDict({**msg.content, "config": config})


def with_mechanism(turn: Turn, name: str, params: dict) -> None:
    """Make this client alone train with mechanism ``(name, params)`` (an override)."""

    def edit(raw: dict) -> None:
        overrides = raw["mechanism"].get("overrides", [])
        raw["mechanism"]["overrides"] = [*overrides, {"clients": [turn.pid], "name": name,
                                                      **params}]

    with_config(turn, edit)


def with_noise_times(turn: Turn, factor: float) -> None:
    """Train with the configured mechanism's noise × ``factor`` (κ / ``factor`` for the VMF)."""
    name, params = turn.cfg.mechanism.for_client(turn.pid)
    key, more = noise_key(name)
    declared = getattr(build_mechanism(name, params), key)
    with_mechanism(turn, name, {key: declared * factor if more else declared / factor})


def report_of(reply: Message) -> ConfigRecord:
    """The reply's report (fedpriv's ``meta`` ConfigRecord)."""
    return reply.content[REPORT_RECORD]


def declare_configured(turn: Turn, reply: Message) -> None:
    """Rewrite the report to declare the mechanism the configuration gives this client."""
    name, params = turn.cfg.mechanism.for_client(turn.pid)
    mechanism = build_mechanism(name, params)
    report = report_of(reply)
    report["mechanism"] = mechanism.name
    report["mechanism-params"] = json.dumps(mechanism.params(), sort_keys=True)


def arrays_of(reply: Message) -> dict[str, np.ndarray]:
    """A copy of the reply's parameters."""
    return {k: v.numpy().copy() for k, v in reply.content["arrays"].items()}


def set_arrays(reply: Message, arrays: dict[str, np.ndarray]) -> None:
    """Replace the reply's parameters."""
    reply.content["arrays"] = ArrayRecord({k: Array(v) for k, v in arrays.items()})


def delta_of(turn: Turn, reply: Message) -> dict[str, np.ndarray]:
    """The reply's update ``θ_client − θ`` (float64)."""
    theta = {k: v.numpy() for k, v in turn.msg.content["arrays"].items()}
    return {k: v.astype(np.float64) - theta[k] for k, v in arrays_of(reply).items()}


def with_update(turn: Turn, reply: Message, delta: dict[str, np.ndarray]) -> None:
    """Make the reply's parameters ``θ + delta`` (in the received dtypes)."""
    theta = {k: v.numpy() for k, v in turn.msg.content["arrays"].items()}
    set_arrays(reply, {k: (theta[k] + delta[k]).astype(theta[k].dtype) for k in theta})
