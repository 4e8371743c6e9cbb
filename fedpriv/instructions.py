"""What the server instructs a client to train with: one function for the ClientApp and the server.

The server sends every client the run's validated config (``fedpriv.protocol.CONFIG_KEY``).
:func:`instructed_report` derives from it the report an honest client sends — the local steps,
learning rate, expected batch size ``L``, sampling, ``q = min(L, n)/n``, the mechanism of
``[mechanism]`` with the client's ``[[mechanism.overrides]]`` (and, on the client, a
SuperNode's ``--node-config`` pins), the optimiser's declared settings and the ε budget. The
ClientApp trains by it and sends it; the server computes the same report for the client it
knows the node to be (``strategies/replies.py``) and compares (:func:`settings_verdict`): one
concept, one place, so that an honest client can never differ from its instructions.

A difference is no statistical question: the server sent the config, so a reply that declares
another learning rate, step count, optimiser or mechanism is ``inconsistent`` (test
``settings``). Without it, a declared ``lr × 0.1`` hides noise × 0.1 from the noise-scale test,
five steps declared as one cut the accounted ε by √5, and declaring ``adam`` in an SGD run turns
the verification off (issue 25). The local size ``n`` is checked where the server knows it
(:func:`size_verdict`, test ``size-sampling``): in simulation it computes every partition.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from fedpriv.config import Config
from fedpriv.kept import KeptAnswers
from fedpriv.mechanisms import Mechanism, build_mechanism
from fedpriv.mechanisms.config import node_config_keys
from fedpriv.protocol import ClientReport, sampling_rate
from fedpriv.training.config import optimizer_settings
from fedpriv.verification.verdict import Verdict

SIZE = ("size-sampling",)  # the property the size check speaks to (Verdict.speaks_to)

__all__ = ["SettingsVerdicts", "client_mechanism", "instructed_report", "settings_differences",
           "settings_key", "settings_verdict", "size_verdict"]


@lru_cache(maxsize=1024)
def _built(name: str, params_json: str) -> Mechanism:
    """One built mechanism per distinct ``(name, params)`` per process (the server asks once
    per reply: 1,000 clients sharing a mechanism build it once)."""
    return build_mechanism(name, json.loads(params_json))


def client_mechanism(
    cfg: Config, partition_id: int, node_config: Mapping[str, Any] | None = None
) -> Mechanism:
    """Client ``partition_id``'s mechanism: ``[mechanism]``, its ``[[mechanism.overrides]]``,
    then a SuperNode's ``--node-config`` pins (``mechanism``, ``noise-multiplier``, …:
    :func:`fedpriv.mechanisms.config.node_config_keys`; docs/deployment.md §2.6). The server
    knows no node config: a pin that the run's config does not also give is a deviation from
    the server's instructions (:func:`settings_verdict`)."""
    name, params = cfg.mechanism.for_client(partition_id)
    for node_key, key in node_config_keys().items():
        if node_config is not None and node_key in node_config:
            value = node_config[node_key]
            if key == "name":
                name = str(value)
            else:
                params[key] = value
    return _built(str(name), json.dumps(params, sort_keys=True))


def instructed_report(
    cfg: Config, partition_id: int, server_round: int, local_examples: int,
    node_config: Mapping[str, Any] | None = None,
) -> ClientReport:
    """The report of client ``partition_id`` holding ``local_examples`` records that follows
    the run's config in round ``server_round``: what fedpriv's ClientApp trains by and sends
    (it adds the oracle's record ids, or ``declined``), and what the server expects.

    Raises
    ------
    InputError
        A node-config pin that is not a valid mechanism (the client's own configuration).
    """
    train = cfg.train
    return ClientReport(
        partition_id=partition_id, server_round=server_round, local_examples=local_examples,
        local_steps=train.local_steps, lr=train.lr, batch_size=float(train.batch_size),
        sampling=train.sampling, sample_rate=sampling_rate(local_examples, train.batch_size),
        mechanism=client_mechanism(cfg, partition_id, node_config),
        epsilon_budget=cfg.mechanism.budget_for(partition_id),
        optimizer=optimizer_settings(train),
    )


def _same(sent: Any, declared: Any) -> bool:
    """Equal values; numbers to 1e-12 relative (a JSON round trip is exact, this is slack
    for a client that computes a value rather than copying it)."""
    if isinstance(sent, bool) or isinstance(declared, bool):
        return sent is declared
    if isinstance(sent, int | float) and isinstance(declared, int | float):
        return math.isclose(sent, declared, rel_tol=1e-12, abs_tol=0.0)
    if isinstance(sent, list | tuple) and isinstance(declared, list | tuple):
        return len(sent) == len(declared) and all(map(_same, sent, declared))
    return sent == declared


#: The settings a report declares, by wire name (docs/protocol.md), beside the mechanism's.
SETTINGS = ("server-round", "steps", "lr", "batch-size", "sampling", "mechanism", "optimizer",
            "momentum", "weight-decay", "nesterov", "epsilon-budget")
#: What a client-level report's settings are (privacy-math.md §11): its release is the whole
#: update, whatever the local training was, so only these enter its ε and its test
#: (``ClientReport.declaration``); a client-level mod on any ClientApp declares ``steps = 1``,
#: ``lr = 1`` (``clients/client_dp.py``).
CLIENT_LEVEL_SETTINGS = ("server-round", "mechanism", "epsilon-budget")


def _fields(report: ClientReport, keys: Sequence[str] = SETTINGS) -> dict[str, Any]:
    """The settings a report declares, by their wire names (docs/protocol.md)."""
    wire = report.to_config()
    out = {k: wire.get(k) for k in keys}
    params = report.mechanism.params()
    out.update({f"mechanism-params.{k}": v for k, v in sorted(params.items())})
    return out


def settings_differences(sent: ClientReport, declared: ClientReport) -> list[tuple[str, Any, Any]]:
    """``(field, sent, declared)`` for every training setting in which ``declared`` differs
    from the report the server's instructions give (``sent``, :func:`instructed_report`);
    the local size and the partition id are not settings (:func:`size_verdict`, identity).
    Where both are client-level (privacy-math.md §11) only :data:`CLIENT_LEVEL_SETTINGS` and
    the mechanism's parameters count."""
    keys = CLIENT_LEVEL_SETTINGS if sent.client_level and declared.client_level else SETTINGS
    a, b = _fields(sent, keys), _fields(declared, keys)
    if sent.mechanism.name != declared.mechanism.name:  # compare the name, not its parameters
        a = {k: v for k, v in a.items() if not k.startswith("mechanism-params.")}
        b = {k: v for k, v in b.items() if not k.startswith("mechanism-params.")}
    keys = [*a, *(k for k in b if k not in a)]
    return [(k, a.get(k), b.get(k)) for k in keys if not _same(a.get(k), b.get(k))]


def settings_verdict(sent: ClientReport, declared: ClientReport) -> Verdict:
    """Test ``settings``: ``inconsistent`` (p = 0: the server knows what it sent) naming each
    differing field, sent vs declared; ``consistent`` (p = 1) when the reply declares exactly
    its instructions."""
    diffs = settings_differences(sent, declared)
    if not diffs:
        return Verdict("settings", "consistent", "the declared training settings and mechanism "
                       "are those the server sent", p_value=1.0, speaks_to=("settings",))
    shown = "; ".join(f"{k}: sent {v!r}, declared {w!r}" for k, v, w in diffs)
    return Verdict("settings", "inconsistent", f"declared settings differ from the server's "
                   f"instructions ({shown})", p_value=0.0, speaks_to=("settings",))


def settings_key(report: ClientReport) -> tuple:
    """What :func:`settings_differences` reads of a report, hashable: reports with equal keys
    differ from any other report in the same fields. The scalars come with their types
    (:func:`_same` tells a bool from a number); the mechanism and the optimiser are validated
    frozen dataclasses (``from_config``), equal only with equal fields of one type each."""
    values = (report.server_round, report.local_steps, report.lr, report.batch_size,
              report.sampling, report.epsilon_budget)
    return (*values, *map(type, values), report.mechanism, report.optimizer)


_KEPT_SETTINGS = 1024
"""Most settings verdicts :class:`SettingsVerdicts` keeps (distinct instructions and
declared settings)."""


class SettingsVerdicts:
    """:func:`settings_verdict` of many replies, computed once per distinct pair of
    :func:`settings_key` (a round's replies mostly declare one instruction, issue 37).
    A ``consistent`` verdict names no value and is shared; an ``inconsistent`` one shows the
    reply's own values (a −0.0 is not a 0.0 there, though the keys are equal), so it is
    computed for each reply — the fields it names are the kept one's."""

    def __init__(self) -> None:
        self._kept: KeptAnswers[Verdict] = KeptAnswers(_KEPT_SETTINGS)

    def __call__(self, sent: ClientReport, declared: ClientReport, sent_key: tuple) -> Verdict:
        """:func:`settings_verdict` of ``declared`` against ``sent`` (``sent_key``: its
        :func:`settings_key`, which the caller keeps per instruction)."""
        key = (sent_key, settings_key(declared))
        computed: list[Verdict] = []  # this reply's own, when its key is new

        def compute() -> Verdict:
            computed.append(settings_verdict(sent, declared))
            return computed[0]

        verdict = self._kept.get(key, compute)
        if computed or verdict.status == "consistent":
            return verdict
        return settings_verdict(sent, declared)  # the reply's own values


def size_verdict(known: int | None, declared: ClientReport, source: str) -> Verdict:
    """Test ``size-sampling``: the declared local size ``n`` (hence ``q = min(L, n)/n``)
    against the size the server knows from ``source`` (the simulation's partition, or
    ``strategy.nodes``); ``unverifiable`` when it knows none."""
    n = declared.local_examples  # at the client level too: n is the aggregation weight there
    if known is None:
        return Verdict("size-sampling", "unverifiable", f"the local size n = {n} is declared: "
                       "the server knows no size for this client (strategy.nodes)",
                       speaks_to=SIZE)
    if n != known:
        return Verdict("size-sampling", "inconsistent", f"declared local size n = {n}, but "
                       f"{source} gives {known} records", p_value=0.0,
                       statistic={"declared": float(n), "known": float(known)}, speaks_to=SIZE)
    return Verdict("size-sampling", "consistent", f"n = {n}, as {source} gives", p_value=1.0,
                   speaks_to=SIZE)
