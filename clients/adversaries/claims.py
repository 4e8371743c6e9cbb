"""Adversaries that train honestly and lie in their reply (docs/trust.md §3).

* ``false-sample-rate`` — declares a sampling rate ``factor`` × the true one;
* ``malformed`` — drops the declared mechanism's parameters from its report;
* ``declare-tiny-sigma`` — declares the noise scale × ``factor`` (unset: σ = 1e-300, inside
  the float range, where the ledger's RDP divides by σ²; κ = 1e300 for the VMF);
* ``declare-huge-steps`` — declares ``factor`` local steps (100,000 by default);
* ``extra-metric`` — adds a metric key no other client sends (FedAvg then refuses the round);
* ``rename-arrays`` — renames its array keys, shapes kept (the same refusal);
* ``inflate-size`` — declares ``factor`` × its local size (unset: 10⁹ examples), with
  ``num-examples`` and the sampling rate to match, so its FedAvg weight takes the round;
* ``steal-identity`` — claims partition id ``target``.
"""

from __future__ import annotations

import json

from flwr.app import Message

from clients.adversaries.base import (
    Turn,
    arrays_of,
    behaviour,
    noise_key,
    report_of,
    set_arrays,
)
from fedpriv.protocol import sampling_rate

_TINY, _HUGE = 1e-300, 1e300
_INFLATED = 10**9


def _false_sample_rate(turn: Turn, reply: Message) -> None:
    report = report_of(reply)
    report["sample-rate"] = float(report["sample-rate"]) * turn.factor


def _malformed(turn: Turn, reply: Message) -> None:
    del report_of(reply)["mechanism-params"]


def _tiny_sigma(turn: Turn, reply: Message) -> None:
    report = report_of(reply)
    params = json.loads(report["mechanism-params"])
    key, more = noise_key(report["mechanism"])
    if turn.factor is None:
        params[key] = _TINY if more else _HUGE
    else:
        params[key] = params[key] * turn.factor if more else params[key] / turn.factor
    report["mechanism-params"] = json.dumps(params, sort_keys=True)


def _huge_steps(turn: Turn, reply: Message) -> None:
    report_of(reply)["steps"] = int(turn.factor)


def _extra_metric(turn: Turn, reply: Message) -> None:
    reply.content["metrics"]["adversary-extra"] = 1.0


def _rename_arrays(turn: Turn, reply: Message) -> None:
    set_arrays(reply, {f"renamed-{i}": a for i, a in enumerate(arrays_of(reply).values())})


def _inflate_size(turn: Turn, reply: Message) -> None:
    report = report_of(reply)
    n = int(report["local-examples"])
    claimed = _INFLATED if turn.factor is None else max(n + 1, round(n * turn.factor))
    report["local-examples"] = claimed
    report["sample-rate"] = sampling_rate(claimed, float(report["batch-size"]))
    reply.content["metrics"]["num-examples"] = claimed


def _steal_identity(turn: Turn, reply: Message) -> None:
    report_of(reply)["partition-id"] = int(turn.adversary.target)


behaviour("false-sample-rate", after=_false_sample_rate)
behaviour("malformed", after=_malformed)
behaviour("declare-tiny-sigma", after=_tiny_sigma)
behaviour("declare-huge-steps", after=_huge_steps)
behaviour("extra-metric", after=_extra_metric)
behaviour("rename-arrays", after=_rename_arrays)
behaviour("inflate-size", after=_inflate_size)
behaviour("steal-identity", after=_steal_identity)
