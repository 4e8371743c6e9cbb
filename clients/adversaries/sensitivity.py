"""Adversaries that break per-record sensitivity or the freshness of a round's step noises
(issue 42; docs/trust.md §3). Each passes every test of its update's noise alone; the server's
replay with the simulation oracle (``strategies/sensitivity_replay.py``) or the steps' freshness
test catches it:

* ``hidden-steps`` — trains ``factor`` (5) × the configured local steps at noise multiplier
  ``σ/√factor`` each and declares the configured steps at ``σ`` (the summed noise has the
  declared law; the records of every hidden step add to the signal), with the oracle naming
  the declared steps' records only (the first batches);
* ``cancel-steps`` — within a round, noise ``z`` at one step and ``−z`` at the next (steps
  mode: every step's release has the declared law, their sum has no noise).

``signal-scale`` (the clipped sum × 10) and ``no-clip`` (:mod:`clients.adversaries.noise`) are
the other two cheats of issue 42 that only the replay sees.
"""

from __future__ import annotations

import json
import math

import torch
from flwr.app import Message

from clients.adversaries.base import Turn, behaviour, declare_configured, report_of, with_config
from clients.adversaries.noise import StandIn, honest_noise
from fedpriv.mechanisms import Mechanism, build_mechanism


def _hidden_steps(turn: Turn) -> None:
    k = int(turn.factor)
    name, params = turn.cfg.mechanism.for_client(turn.pid)
    sigma = build_mechanism(name, params).noise_multiplier
    steps = turn.cfg.train.local_steps * k

    def edit(raw: dict) -> None:  # one edit: with_config starts from the server's config
        raw["train"]["local_steps"] = steps
        overrides = raw["mechanism"].get("overrides", [])
        raw["mechanism"]["overrides"] = [*overrides, {"clients": [turn.pid], "name": name,
                                                      **params,
                                                      "noise_multiplier": sigma / math.sqrt(k)}]

    with_config(turn, edit)


def _declare_steps(turn: Turn, reply: Message) -> None:
    declare_configured(turn, reply)
    report = report_of(reply)
    declared = turn.cfg.train.local_steps
    report["steps"] = declared
    if "record-ids" in report:  # the oracle names the declared steps' records only
        report["record-ids"] = json.dumps(json.loads(report["record-ids"])[:declared])


def _cancel_steps(turn: Turn, inner: Mechanism) -> StandIn:
    own = honest_noise(inner)
    kept: list[torch.Tensor] = []

    def noise(total: torch.Tensor, generator: torch.Generator, step: int) -> torch.Tensor:
        if step % 2 == 0:
            kept[:] = [own(total, generator, step)]
            return kept[0]
        return -kept[0]

    return StandIn(inner, noise)


behaviour("hidden-steps", before=_hidden_steps, after=_declare_steps)
behaviour("cancel-steps", release=_cancel_steps)
