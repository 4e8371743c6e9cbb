"""Adversaries that change the update they return (docs/trust.md §3).

* ``scale-update`` — returns ``θ + factor·Δ``;
* ``replay`` — from round 2 on, returns θ + its first round's update again;
* ``perturbed-replay`` — the same, plus a fresh random vector of ``factor`` (1 %) × the
  update's norm: no longer an exact repeat.
"""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, Message

from clients.adversaries.base import Turn, behaviour, delta_of, with_update
from fedpriv.seeding import derive_seed

_FIRST = "adversary-first-update"


def _scale_update(turn: Turn, reply: Message) -> None:
    with_update(turn, reply, {k: turn.factor * d for k, d in delta_of(turn, reply).items()})


def _first_update(turn: Turn, delta: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The first round's update, kept in the node's state, every round after."""
    state = turn.context.state
    if _FIRST not in state.array_records:
        state[_FIRST] = ArrayRecord({k: Array(v) for k, v in delta.items()})
        return delta
    return {k: v.numpy() for k, v in state[_FIRST].items()}


def _replay(turn: Turn, reply: Message) -> None:
    with_update(turn, reply, _first_update(turn, delta_of(turn, reply)))


def _perturbed_replay(turn: Turn, reply: Message) -> None:
    fresh = delta_of(turn, reply)
    delta = _first_update(turn, fresh)
    if delta is fresh:
        with_update(turn, reply, delta)
        return
    rng = np.random.default_rng(derive_seed(turn.noise_seed, turn.pid, turn.round,
                                            "adversary-perturbation"))
    noise = {k: rng.standard_normal(d.shape) for k, d in delta.items()}
    norm = np.sqrt(sum(float(np.sum(d.astype(np.float64) ** 2)) for d in delta.values()))
    size = np.sqrt(sum(float(np.sum(z**2)) for z in noise.values()))
    scale = turn.factor * norm / size
    with_update(turn, reply, {k: d + scale * noise[k] for k, d in delta.items()})


behaviour("scale-update", after=_scale_update)
behaviour("replay", after=_replay)
behaviour("perturbed-replay", after=_perturbed_replay)
