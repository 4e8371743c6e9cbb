"""The client → server reply schema: what a client says about its round, beside its parameters.

A ClientApp's train reply carries its new parameters (one ArrayRecord), ``num-examples`` and
``train-loss`` (one MetricRecord, averaged by Flower) and a :class:`ClientReport` (one
ConfigRecord under :data:`REPORT_RECORD`, never averaged). The ClientApp writes it with
:meth:`ClientReport.to_config`; the server reads it once, with :meth:`ClientReport.from_config`,
which validates every field and raises :class:`ReplyError` naming the field — the server
records that as the client's failure and the round goes on. Flower types stay outside: the two
methods speak plain mappings of ConfigRecord values.

Nothing here is trusted because a client said it: the server checks what it can (the update
against the declared mechanism, the identity against earlier rounds) elsewhere. What a client
must not send at all — record ids and the sizes of its batches, which reveal batch membership —
travels only when the labelled, simulation-only ground-truth oracle is on (``oracle``).

A client with an ε budget that declines a round says so in the report (``declined``) and sends
nothing else. The one thing the server tells such clients beyond the config is how many releases
it accounted for each (:data:`fedpriv.budget.RELEASES_KEY`).

The protocol is versioned (:data:`PROTOCOL_VERSION`; docs/protocol.md): the server sends its
version in every train config (:data:`PROTOCOL_KEY`) and a report echoes the version it was
written in (``protocol-version``); a report without one is version 1, the format before the
field existed. A reply without a report at all is a stock Flower client's: the server audits it
as ``undeclared`` (``audit.undeclared``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fedpriv.accounting.sampling import sampled_population
from fedpriv.errors import InputError
from fedpriv.optimizer_settings import OPTIMIZERS, OptimizerSettings, optimizer_conflict

if TYPE_CHECKING:
    from fedpriv.mechanisms import Mechanism
    from fedpriv.verification import Declaration

__all__ = [
    "FLOWER_DP_RECORD",
    "MAX_LOCAL_EXAMPLES",
    "MAX_LOCAL_STEPS",
    "MAX_NUM_EXAMPLES",
    "OPTIMIZERS",
    "MAX_REASON",
    "CONFIG_KEY",
    "PROTOCOL_KEY",
    "PROTOCOL_VERSION",
    "REPORT_RECORD",
    "STEPS_RECORD",
    "ClientReport",
    "GroundTruthOracle",
    "ProtocolError",
    "ReplyError",
    "finite_number",
    "optimizer_conflict",
    "reply_int",
    "sampling_rate",
    "server_config",
]

PROTOCOL_VERSION = 1
"""The wire protocol this code speaks (docs/protocol.md). Version 1 is the format of every
fedpriv release so far; a report that names no version is read as version 1."""
PROTOCOL_KEY = "fedpriv-protocol"
"""Train-config key (server → client) of the server's :data:`PROTOCOL_VERSION`."""
CONFIG_KEY = "fedpriv-config"
"""Train- and evaluate-config key (server → client) of the run's validated config (JSON)."""
REPORT_RECORD = "meta"
"""Name of the reply's ConfigRecord that holds the report."""
FLOWER_DP_RECORD = "flower-dp"
"""Reply ConfigRecord of the Flower DP mod's own parameters (informative: docs/flower-dp.md)."""
STEPS_RECORD = "step-releases"
"""Name of the reply's second ArrayRecord in steps mode (``audit.release = "steps"``): every
local step's release, per parameter tensor stacked along a leading step axis (docs/protocol.md)."""
MAX_LOCAL_STEPS = 100_000
"""Most local steps a round may take (``train.local_steps`` and a reply's ``steps``)."""
MAX_LOCAL_EXAMPLES = 1_000_000_000
"""Most records a client may declare."""
MAX_NUM_EXAMPLES = 2**63 - 1
"""Largest ``num-examples`` (the aggregation weight) any reply may carry, a stock client's
included: the largest integer the audit store (SQLite's INTEGER) and Flower's wire format
(sint64) hold. A declared reply's must equal its ``local-examples`` besides."""


def sampling_rate(n: int, batch_size: float) -> float:
    """``q = min(L, n)/n``: the rate of a batch of expected size ``L`` among ``n`` records
    (what a client declares, and what the server checks it against)."""
    return min(batch_size, n) / n


MAX_REASON = 1_000
"""Longest reason a declining client may give."""


class ReplyError(ValueError):
    """A reply field that fails validation: the client's failure, not the run's."""

    def __init__(self, field_name: str, value: object, allowed: str) -> None:
        self.field = field_name
        self.value = value
        self.allowed = allowed
        try:
            shown = repr(value)
        except ValueError:  # an integer past Python's 4,300 digits of str(), maybe in a list
            shown = (f"<an integer of {value.bit_length():,} bits>" if isinstance(value, int)
                     else f"<a {type(value).__name__} holding an integer too long to print>")
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        super().__init__(f"reply field {field_name!r} = {shown}: expected {allowed}")


class ProtocolError(ValueError):
    """A message from the server that fedpriv's ClientApp cannot serve (docs/protocol.md)."""


def server_config(config: Mapping[str, Any] | None, where: str = "train") -> str:
    """The run's config (JSON) that fedpriv's server ships in a ``where`` message's ConfigRecord
    ``"config"``, after checking the server's protocol version (absent: version 1).

    Raises
    ------
    ProtocolError
        The message has no ConfigRecord ``"config"``, no :data:`CONFIG_KEY` in it (a server that
        is not fedpriv's, e.g. Flower's stock ``FedAvg`` ServerApp), or a protocol version this
        client does not speak; the message names what is missing and where to read about it.
    """
    if config is None or CONFIG_KEY not in config:
        place = ("no ConfigRecord 'config'" if config is None
                 else f"no key {CONFIG_KEY!r} in its ConfigRecord 'config'")
        raise ProtocolError(
            f"fedpriv's ClientApp needs fedpriv's run config, but the {where} message has "
            f"{place}: serve it with fedpriv's ServerApp, or send the config as "
            f"docs/protocol.md describes")
    version = config.get(PROTOCOL_KEY, 1)  # absent: a server from before the key
    if isinstance(version, bool) or version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"the server speaks fedpriv protocol version {version!r} ({PROTOCOL_KEY}); this "
            f"client speaks version {PROTOCOL_VERSION} (docs/protocol.md)")
    return str(config[CONFIG_KEY])


@dataclass(frozen=True)
class GroundTruthOracle:
    """What the simulation-only ground-truth oracle adds to a reply: the record ids of each
    local batch (hence their sizes) and, optionally, the seeded stream its noise came from. It
    defeats the secrecy of the batch that Poisson
    amplification assumes: with it on, the auditor holds batch membership."""

    record_ids: tuple[tuple[int, ...], ...]
    noise_stream: str | None = None
    """:data:`fedpriv.seeding.SEEDED_NOISE` when the batches and the noise were drawn from the
    run's seeded CPU stream (fedpriv's own client says so where its side opted in to that
    stream: :func:`fedpriv.seeding.client_noise_seed`): the server then re-draws the committed
    noise exactly (:mod:`fedpriv.verification.committed`). None: not said (a client whose noise
    is its secret, the default)."""

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(len(batch) for batch in self.record_ids)


def reply_int(name: str, value: Any, low: int, high: int) -> int:
    """``value``, a reply's field ``name``, as an integer in ``[low, high]``.

    Parameters
    ----------
    name
        The field's wire name (docs/protocol.md), for the message.
    value
        What the reply holds: anything (a bool, a float, a string, a list is refused).
    low, high
        The closed range allowed.

    Returns
    -------
    int
        ``value`` itself.

    Raises
    ------
    ReplyError
        Naming the field, its value and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ReplyError(name, value, f"an integer in [{low:,}, {high:,}]")
    return value


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is none: a bool, a string, a list, NaN,
    ±inf, or an integer beyond the floats (10³⁰⁰⁰ would overflow any arithmetic on it).

    Parameters
    ----------
    value
        What a reply holds.

    Returns
    -------
    float or None
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _real(name: str, value: Any, low: float, high: float, *, open_low: bool = True) -> float:
    number = finite_number(value)
    ok = number is not None and (number > low if open_low else number >= low)
    if not (ok and number <= high):
        raise ReplyError(name, value, f"a number in {'(' if open_low else '['}{low:g}, {high:g}]")
    return number


def _json(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        raise ReplyError(name, value, "a JSON string")
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        raise ReplyError(name, value, "valid JSON") from None


@dataclass(frozen=True)
class ClientReport:
    """One client's account of one round of local training.

    Attributes
    ----------
    partition_id
        The client (partition) id the node claims.
    server_round
        The round it trained in (echoed).
    local_examples
        ``n``, the records it holds (declared; the server cannot check it).
    local_steps
        Local steps, each one noisy release.
    lr
        Local learning rate η.
    batch_size
        The expected batch size ``L`` (public).
    sampling
        ``"poisson"`` or ``"fixed"``.
    sample_rate
        ``q = min(L, n) / n``.
    mechanism
        The declared mechanism, built and frozen (a claim the server verifies): the client
        reports the object it trains with; :meth:`from_config` builds it once from the
        reply's name and public parameters. Everything that depends on the mechanism's
        parameters — its release, its checks, its canary scores — is read from it.
    oracle
        Ground truth, only when the simulation-only oracle is on.
    optimizer
        The local optimiser that stepped on each release
        (:class:`~fedpriv.optimizer_settings.OptimizerSettings`), created afresh every round
        (:mod:`fedpriv.training.optimizers`). Plain SGD when a reply leaves it out.
    epsilon_budget
        The client's ε budget at the run's δ, if it has one (``mechanism.epsilon_budget``).
    declined
        Why the client declined to train this round (its budget would be exceeded), or None
        when it trained. A declining reply carries no parameters and no metrics: the report
        alone, with the round's steps and sampling rate it would have used.
    """

    partition_id: int
    server_round: int
    local_examples: int
    local_steps: int
    lr: float
    batch_size: float
    sampling: str
    sample_rate: float
    mechanism: Mechanism
    oracle: GroundTruthOracle | None = None
    optimizer: OptimizerSettings = OptimizerSettings()
    epsilon_budget: float | None = None
    declined: str | None = None

    def to_config(self) -> dict[str, Any]:
        """ConfigRecord values (scalars and JSON strings)."""
        out: dict[str, Any] = {
            "protocol-version": PROTOCOL_VERSION,
            "partition-id": self.partition_id,
            "server-round": self.server_round,
            "local-examples": self.local_examples,
            "steps": self.local_steps,
            "lr": self.lr,
            "batch-size": self.batch_size,
            "sampling": self.sampling,
            "sample-rate": self.sample_rate,
            "mechanism": self.mechanism.name,
            "mechanism-params": json.dumps(self.mechanism.params(), sort_keys=True),
            "optimizer": self.optimizer.name,
            "momentum": self.optimizer.momentum,
            "weight-decay": self.optimizer.weight_decay,
            "nesterov": self.optimizer.nesterov,
        }
        if self.oracle is not None:
            out["record-ids"] = json.dumps([list(b) for b in self.oracle.record_ids])
            if self.oracle.noise_stream is not None:
                out["noise-stream"] = self.oracle.noise_stream
        if self.epsilon_budget is not None:
            out["epsilon-budget"] = self.epsilon_budget
        if self.declined is not None:
            out["declined"] = self.declined
        return out

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClientReport:
        """Read and validate a report; :class:`ReplyError` names the first bad field.

        The mechanism name and parameters are checked by building the mechanism, once
        (``fedpriv.mechanisms.build_mechanism``): an unknown name or a bad value is the
        client's error, never the user's configuration error. The server reads a reply, and
        the audit store a stored report (:class:`fedpriv.audit.UpdateRecord`), through here.
        """
        from fedpriv.mechanisms import build_mechanism

        def get(name: str) -> Any:
            if name not in config:
                raise ReplyError(name, None, "a value (the field is missing)")
            return config[name]

        version = config.get("protocol-version", 1)  # absent: the format before the field
        if (isinstance(version, bool) or not isinstance(version, int)
                or version != PROTOCOL_VERSION):
            raise ReplyError("protocol-version", version,
                             f"protocol version {PROTOCOL_VERSION}, the one this server speaks "
                             "(docs/protocol.md)")
        n = reply_int("local-examples", get("local-examples"), 1, MAX_LOCAL_EXAMPLES)
        batch_size = _real("batch-size", get("batch-size"), 0.0, MAX_LOCAL_EXAMPLES)
        sampling = get("sampling")
        if sampling not in ("poisson", "fixed"):
            raise ReplyError("sampling", sampling, "'poisson' or 'fixed'")
        sample_rate = _real("sample-rate", get("sample-rate"), 0.0, 1.0)
        expected = sampling_rate(n, batch_size)
        if not math.isclose(sample_rate, expected, rel_tol=1e-9):
            raise ReplyError("sample-rate", sample_rate,
                             f"min(batch-size, local-examples) / local-examples = {expected:.6g}")
        name, params = get("mechanism"), _json("mechanism-params", get("mechanism-params"))
        if not isinstance(params, dict):
            raise ReplyError("mechanism-params", params, "a JSON object")
        try:
            mechanism = build_mechanism(name, params, key_prefix="mechanism")
        except InputError as exc:
            raise ReplyError(exc.key.replace("mechanism.", "mechanism-params.")
                             if exc.key != "mechanism.name" else "mechanism",
                             exc.value, exc.allowed) from None
        steps = reply_int("steps", get("steps"), 1, MAX_LOCAL_STEPS)
        oracle = None
        if "record-ids" in config:
            oracle = _oracle(_json("record-ids", config["record-ids"]),
                             config.get("noise-stream"))
            if len(oracle.record_ids) != steps:
                raise ReplyError("record-ids", f"{len(oracle.record_ids)} batches",
                                 f"one batch per local step ({steps})")
        elif "noise-stream" in config:
            raise ReplyError("noise-stream", config["noise-stream"],
                             "nothing without record-ids (the simulation oracle's)")
        return cls(
            partition_id=reply_int("partition-id", get("partition-id"), 0, 2**31 - 1),
            server_round=reply_int("server-round", get("server-round"), 1, 2**31 - 1),
            local_examples=n,
            local_steps=steps,
            lr=_real("lr", get("lr"), 0.0, 1e6),
            batch_size=batch_size,
            sampling=sampling,
            sample_rate=sample_rate,
            mechanism=mechanism,
            oracle=oracle,
            optimizer=_optimizer(config),
            epsilon_budget=(None if config.get("epsilon-budget") is None else
                            _real("epsilon-budget", config["epsilon-budget"], 0.0, math.inf)),
            declined=None if config.get("declined") is None else _reason(config["declined"]),
        )

    @property
    def client_level(self) -> bool:
        """Whether the declared mechanism privatises the whole update (privacy-math.md §11)
        rather than each local step's batch."""
        return self.mechanism.level == "client"

    @property
    def releases(self) -> int:
        """Noisy releases this round made: one per local step, or one (the update) at the
        client level."""
        return 1 if self.client_level else self.local_steps

    @property
    def release_rate(self) -> float:
        """The sampling rate each release is accounted at: the records' ``q``, or 1 at the
        client level — the server knows who took part, so its client sampling amplifies
        nothing against it (§11)."""
        return 1.0 if self.client_level else self.sample_rate

    @property
    def release_sampling(self) -> dict[str, Any]:
        """How each release was sampled, as the ledger and the budget check take it:
        ``sample_rate`` (:attr:`release_rate`) and ``population`` — ``n`` for fixed-size
        batches (``m = q·n`` of the ``n`` records, without replacement), None under Poisson
        sampling and at the client level (privacy-math.md §14)."""
        return {"sample_rate": self.release_rate,
                "population": sampled_population(self.sampling, self.mechanism.level,
                                                 self.sample_rate, self.local_examples)}

    @property
    def secret_batch(self) -> float:
        """The batch a batch-level secret spans, in sensitivities (``L``); 1 at the client
        level, where the secret is the client's update, within the clip bound (§5, §11)."""
        return 1.0 if self.client_level else self.batch_size

    @property
    def divisor(self) -> float:
        """``q·n`` (= min(L, n)): the expected batch size each release was divided by."""
        return self.sample_rate * self.local_examples

    def declaration(self) -> Declaration:
        """What the verification reads of this report: its mechanism-independent fields
        (privacy-math.md §9; :func:`fedpriv.verification.verify_update`, with
        ``self.mechanism.verify`` for the mechanism's own checks). The divisor is ``q·n``, the
        nearest integer under fixed-size sampling (``q = L/n``: ``q·n`` may miss ``L`` by an
        ulp); the batch sizes are known from the oracle only; the optimiser is created afresh
        every round. A client-level release (§11) is the update itself: one release of step
        scale 1 whose signal is one clipped update, whatever the local training was."""
        from fedpriv.verification import Declaration

        if self.client_level:  # the update is the release: one step of scale 1, B = 1
            return Declaration(
                sensitivity=self.mechanism.sensitivity, lr=1.0, steps=1, batch_size=1.0,
                local_size=1, sample_rate=1.0, sampling="fixed", batch_sizes=(1,),
            )
        divisor = self.divisor
        if self.sampling == "fixed" and math.isclose(divisor, round(divisor), rel_tol=1e-9):
            divisor = float(round(divisor))
        return Declaration(
            sensitivity=self.mechanism.sensitivity, lr=self.lr, steps=self.local_steps,
            batch_size=divisor, local_size=self.local_examples, sample_rate=self.sample_rate,
            sampling=self.sampling,
            batch_sizes=None if self.oracle is None else self.oracle.batch_sizes,
            optimizer=self.optimizer, fresh_state=True,
        )


def _optimizer(config: Mapping[str, Any]) -> OptimizerSettings:
    """The optimiser fields (plain SGD where a reply leaves them out), validated together."""
    name = config.get("optimizer", "sgd")
    if name not in OPTIMIZERS:
        raise ReplyError("optimizer", name, f"one of {list(OPTIMIZERS)}")
    momentum = _real("momentum", config.get("momentum", 0.0), 0.0, 1.0, open_low=False)
    if momentum == 1.0:
        raise ReplyError("momentum", momentum, "a number in [0, 1)")
    decay = _real("weight-decay", config.get("weight-decay", 0.0), 0.0, 1e6, open_low=False)
    nesterov = config.get("nesterov", False)
    if not isinstance(nesterov, bool):
        raise ReplyError("nesterov", nesterov, "true or false")
    bad = optimizer_conflict(name, momentum, nesterov)
    if bad is not None:
        raise ReplyError(bad, momentum if bad == "momentum" else nesterov,
                         f"0 / false with optimizer {name!r} (SGD's settings)" if name != "sgd"
                         else "false unless momentum > 0")
    return OptimizerSettings(name, momentum, nesterov, decay)


def _reason(value: Any) -> str:
    if not (isinstance(value, str) and 0 < len(value) <= MAX_REASON):
        raise ReplyError("declined", value, f"a reason of 1 to {MAX_REASON} characters")
    return value


def _oracle(batches: Any, noise_stream: Any = None) -> GroundTruthOracle:
    ok = isinstance(batches, list) and all(
        isinstance(b, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                    for i in b)
        for b in batches
    )
    if not ok:
        raise ReplyError("record-ids", batches, "a list of lists of record ids >= 0")
    from fedpriv.seeding import SEEDED_NOISE

    if noise_stream not in (None, SEEDED_NOISE):
        raise ReplyError("noise-stream", noise_stream, f"{SEEDED_NOISE!r} or absent")
    return GroundTruthOracle(tuple(tuple(b) for b in batches), noise_stream)

