"""Experiment configuration: TOML presets, ``--set`` overrides, validation before any work.

A configuration is a tree of frozen dataclasses. Every field declares its type and, through
:func:`rule`, what values are allowed; :func:`load_config` checks every key of the TOML
document (unknown keys, wrong types, values out of range) and raises
:class:`~fedpriv.errors.InputError` naming the dotted key, the value and what is allowed.
Mechanism parameters are validated by building each mechanism once
(:func:`fedpriv.mechanisms.build_mechanism`).

The same dotted keys work as ``fedpriv simulate --set train.lr=0.1`` and as Flower run config
(``flwr run . -c '"train.lr"=0.1'``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import tomllib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpriv.devices import DEVICES
from fedpriv.errors import InputError
from fedpriv.mechanisms.registry import (
    accountable,
    mechanism_class,
    mechanism_names,
    parameter_field,
    parameter_names,
    release_class,
)
from fedpriv.protocol import MAX_LOCAL_STEPS, OPTIMIZERS, optimizer_conflict
from fedpriv.validate import check_positive

__all__ = [
    "ADVERSARY_BEHAVIOURS",
    "BUDGET_KEY",
    "AdversaryConfig",
    "AuditConfig",
    "CANARY_METHODS",
    "CanaryConfig",
    "Config",
    "DataConfig",
    "MAX_SEED",
    "MechanismConfig",
    "ModelConfig",
    "STRATEGY_PARAMETERS",
    "SimulationConfig",
    "StrategyConfig",
    "SweepConfig",
    "TrainConfig",
    "apply_override",
    "config_from_dict",
    "load_config",
    "node_config_keys",
    "parameter_list_keys",
    "parse_override",
]

Check = Callable[[Any], bool]

BUDGET_KEY = "epsilon_budget"
"""The ``[mechanism]`` key (and override key) of a client's ε budget."""


def rule(allowed: str, check: Check | None = None, **kwargs: Any) -> Any:
    """A dataclass field whose value must satisfy ``check``; ``allowed`` says what is allowed."""
    return field(metadata={"allowed": allowed, "check": check}, **kwargs)


def _positive(v: Any) -> bool:
    return v > 0


#: Seeds go to ``torch.manual_seed`` and SQLite INTEGER columns: 63 bits at most.
MAX_SEED = 2**63 - 1


def _seed(v: Any) -> bool:
    return 0 <= v <= MAX_SEED


def _count(low: int, high: int, what: str = "") -> tuple[str, Check]:
    """An integer in ``[low, high]``: every count has a ceiling, so a typo cannot start a run
    without end or exhaust memory."""
    return f"an integer in [{low:,}, {high:,}]{what}", lambda v: low <= v <= high


def _one_of(*choices: str) -> tuple[str, Check]:
    return f"one of {list(choices)}", lambda v: v in choices


@dataclass(frozen=True)
class DataConfig:
    """``[data]``: which data set, where it lives, and how it is split across clients."""

    name: str = rule(*_one_of("digits", "mnist", "fashion-mnist", "cifar10"), default="digits")
    root: str = rule("a directory path", default="data")
    download: bool = rule("true or false", default=False)
    num_clients: int = rule(*_count(1, 1_000_000), default=10)
    partition: str = rule(*_one_of("iid", "dirichlet"), default="iid")
    dirichlet_alpha: float = rule("a number > 0", _positive, default=0.5)
    test_fraction: float = rule(
        "a number in (0, 1)", lambda v: 0 < v < 1, default=0.2
    )  # digits only: torchvision sets use their official test split


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``."""

    name: str = rule(*_one_of("paper-mlp", "small-cnn"), default="paper-mlp")


@dataclass(frozen=True)
class TrainConfig:
    """``[train]``: local DP-SGD on each client."""

    batch_size: int = rule(*_count(1, 1_000_000), default=16)
    lr: float = rule("a number > 0", _positive, default=0.5)
    local_steps: int = rule(f"an integer in [1, {MAX_LOCAL_STEPS:,}]",
                            lambda v: 1 <= v <= MAX_LOCAL_STEPS, default=1)
    sampling: str = rule(*_one_of("poisson", "fixed"), default="poisson")
    fraction_train: float = rule("a number in (0, 1]", lambda v: 0 < v <= 1, default=1.0)
    optimizer: str = rule(*_one_of(*OPTIMIZERS), default="sgd")
    momentum: float = rule("a number in [0, 1) (SGD only)", lambda v: 0 <= v < 1, default=0.0)
    nesterov: bool = rule("true or false (SGD with momentum > 0 only)", default=False)
    weight_decay: float = rule(
        "a number >= 0 (added to the released gradient, as Opacus does; adamw: decoupled)",
        lambda v: v >= 0, default=0.0,
    )
    betas: list[float] = rule(
        "two numbers in [0, 1): Adam's and AdamW's (beta1, beta2)",
        lambda v: len(v) == 2 and all(0 <= b < 1 for b in v),
        default_factory=lambda: [0.9, 0.999],
    )

    def local_optimizer(self) -> Any:
        """The :class:`fedpriv.training.LocalOptimizer` these settings describe (imports torch)."""
        from fedpriv.training.optimizers import LocalOptimizer

        return LocalOptimizer(self.optimizer, self.momentum, self.nesterov, self.weight_decay,
                              (self.betas[0], self.betas[1]))


def _check_optimizer(train: TrainConfig) -> None:
    """Settings that do not fit the chosen optimiser, named by key."""
    bad = optimizer_conflict(train.optimizer, train.momentum, train.nesterov)
    if bad is None:
        return
    raise InputError(f"train.{bad}", getattr(train, bad),
                     f"unset with train.optimizer = {train.optimizer!r} (SGD's setting; "
                     "Adam's moments are set by train.betas)" if train.optimizer != "sgd"
                     else "false unless train.momentum > 0")


@dataclass(frozen=True)
class MechanismConfig:
    """``[mechanism]`` and ``[[mechanism.overrides]]`` (per-client mechanisms by partition id).

    The table is flat, as in TOML: ``name`` plus any parameter a registered mechanism declares
    (``clip``, ``noise_multiplier``, ``kappa``, ...; :mod:`fedpriv.mechanisms.registry`), each
    checked by the mechanism's own declaration. A parameter left out takes the mechanism's
    default; one the chosen mechanism does not use is ignored (an override may switch to a
    mechanism that uses it).

    ``epsilon_budget`` (default: none) is the ε at ``audit.delta`` a client may spend: a client
    whose next round would take it over declines to train (``clients/budget.py``). It is a key
    of this table, not a mechanism parameter: a budget is the client's policy on how many
    releases to make, not a property of a release, so it stays out of ``Mechanism.params()`` —
    the declaration the server verifies, stores with every update and rebuilds releases from —
    and no mechanism has to declare it. An override may set it per client.
    """

    name: str = "gaussian"
    params: dict[str, Any] = field(default_factory=dict)
    overrides: list[dict[str, Any]] = field(default_factory=list)
    epsilon_budget: float | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], prefix: str) -> MechanismConfig:
        """Validate a ``[mechanism]`` table (keys named ``f"{prefix}<key>"`` in errors)."""
        if not isinstance(raw, Mapping):
            raise InputError(prefix.rstrip("."), raw, "a table")
        raw = dict(raw)
        name = raw.pop("name", cls.name)
        mechanism_class(name, f"{prefix}name")
        overrides = raw.pop("overrides", [])
        if not (isinstance(overrides, list) and all(isinstance(o, dict) for o in overrides)):
            raise InputError(f"{prefix}overrides", overrides,
                             "a list of tables with `clients = [ids]` and mechanism keys")
        budget = raw.pop(BUDGET_KEY, None)
        if budget is not None:
            budget = check_positive(f"{prefix}{BUDGET_KEY}", budget)
        return cls(name, _mechanism_params(raw, prefix), overrides, budget)

    def to_dict(self) -> dict[str, Any]:
        """The flat table again."""
        out = {"name": self.name, **self.params}
        if self.epsilon_budget is not None:
            out[BUDGET_KEY] = self.epsilon_budget
        return {**out, "overrides": list(self.overrides)} if self.overrides else out

    def budget_for(self, client_id: int) -> float | None:
        """The ε budget of client ``client_id`` (last override that sets one wins; None:
        no budget)."""
        budget = self.epsilon_budget
        for override in self.overrides:
            if client_id in override["clients"] and BUDGET_KEY in override:
                budget = float(override[BUDGET_KEY])
        return budget

    @property
    def has_budgets(self) -> bool:
        """Whether any client has an ε budget."""
        return self.epsilon_budget is not None or any(BUDGET_KEY in o for o in self.overrides)

    def value(self, key: str) -> Any:
        """The value this table gives a mechanism parameter, else the parameter's default."""
        if key in self.params:
            return self.params[key]
        declared = parameter_field(key)
        if declared is None:
            raise KeyError(key)
        return declared.default

    def for_client(self, client_id: int) -> tuple[str, dict[str, Any]]:
        """``(name, params)`` of the mechanism client ``client_id`` uses (last override wins)."""
        name, params = self.name, dict(self.params)
        for override in self.overrides:
            if client_id in override["clients"]:
                extra = {k: v for k, v in override.items() if k not in ("clients", BUDGET_KEY)}
                name = extra.pop("name", name)
                params.update(extra)
        return name, params


def _mechanism_params(raw: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Each key checked as a parameter some registered mechanism declares, by its checker."""
    params = {}
    for key, value in raw.items():
        declared = parameter_field(key)
        if declared is None:
            known = ["name", "overrides", BUDGET_KEY, *parameter_names()]
            raise InputError(f"{prefix}{key}", value, f"a known key: one of {known}")
        params[key] = declared.metadata["check"](f"{prefix}{key}", value)
        if isinstance(params[key], tuple):
            params[key] = list(params[key])
    return params


#: The estimators of an ε lower bound (``fedpriv.canaries.ESTIMATORS``; docs/canaries.md).
CANARY_METHODS = ("one-run", "clopper-pearson", "gdp-thresholds", "gdp-fit")
#: Estimators that assume a Gaussian privacy profile: for Gaussian releases only.
_GAUSSIAN_ONLY = ("gdp-thresholds", "gdp-fit")


@dataclass(frozen=True)
class CanaryConfig:
    """``[audit.canaries]``: gradient canaries inserted by every client and scored by the
    server, for a lower bound on ε beside the accountant's (docs/canaries.md)."""

    enabled: bool = rule("true or false", default=False)
    count: int = rule(*_count(2, 1_000_000, " (at most the model's parameter count for "
                                           "coordinate canaries)"), default=1000)
    kind: str = rule(*_one_of("coordinate", "random"), default="coordinate")
    confidence: float = rule("a number in (0, 1)", lambda v: 0 < v < 1, default=0.95)
    method: str = rule(*_one_of(*CANARY_METHODS), default="one-run")


@dataclass(frozen=True)
class AuditConfig:
    """``[audit]``: what the honest-but-curious server logs, tallies and attacks."""

    enabled: bool = rule("true or false", default=True)
    delta: float = rule("a number in (0, 1)", lambda v: 0 < v < 1, default=1e-5)
    accountant: str = rule(*_one_of("rdp", "pld"), default="rdp")
    threat_model: str = rule(*_one_of("record", "batch"), default="record")
    ground_truth: bool = rule(
        "true or false: the simulation-only oracle that ships each batch's record ids to the "
        "auditor for scoring", default=False,
    )
    verify_alpha: float = rule(
        "a number in (0, 0.5]: the false-alarm rate of each test of an update against its "
        "declared mechanism", lambda v: 0 < v <= 0.5, default=1e-6,
    )
    pac_beta: float = rule(
        "a number in (0, 1): the failure probability beta of the PAC accuracy of a release "
        "(Zhang & Chen, Thm 4.3)", lambda v: 0 < v < 1, default=0.01,
    )
    attacks: list[str] = rule(
        "a list of attack names (checked against the attack registry before the run starts)",
        lambda v: len(set(v)) == len(v) and all(v), default_factory=list,
    )
    every: int = rule(*_count(1, 1_000_000), default=1)
    clients: str | int | list[int] = rule(
        '"all", a number of clients >= 1, or a list of client ids',
        lambda v: v == "all" if isinstance(v, str) else (v >= 1 if isinstance(v, int) else True),
        default="all",
    )
    iterations: int = rule(*_count(1, 1_000_000), default=2000)
    restarts: int = rule(*_count(1, 1_000), default=1)
    tv_weight: float = rule("a number >= 0 (IGA's total-variation weight)", lambda v: v >= 0,
                            default=0.2)
    seed: int = rule(f"an integer in [0, {MAX_SEED}]", _seed, default=0)
    executor: str = rule(*_one_of("inline", "ray"), default="inline")
    bayes_runs: int = rule(*_count(0, 1_000, " (0 disables the estimate)"), default=0)
    bayes_threshold: float = rule("a number in (0, 1]", lambda v: 0 < v <= 1, default=0.5)
    bayes_smoothing: float = rule("a number >= 0", lambda v: v >= 0, default=1.0)
    bayes_distractors: int = rule(*_count(0, 100_000), default=15)
    canaries: CanaryConfig = field(default_factory=CanaryConfig)
    store_updates: str = rule(*_one_of("all", "attacked", "none"), default="all")
    update_dtype: str = rule(*_one_of("float32", "float16"), default="float32")


def node_config_keys() -> dict[str, str]:
    """Mechanism keys a SuperNode can set in ``--node-config`` (Flower's dashed style) → the
    ``[mechanism]`` key they override; the ClientApp reads them, ``deploy-local`` writes them."""
    keys = {"mechanism": "name"}
    keys.update({name.replace("_", "-"): name for name in parameter_names()})
    return keys


#: Adversarial behaviour → its parameters, their defaults and what is allowed.
ADVERSARY_BEHAVIOURS: dict[str, dict[str, tuple[float, str]]] = {
    "under-noise": {"factor": (0.25, "a number in (0, 1): the fraction of the declared noise "
                                     "scale actually added")},
    "no-noise": {},
    "false-sample-rate": {"factor": (0.1, "a number in (0, 1): the declared sampling rate "
                                           "over the true one")},
    "scale-update": {"factor": (1e6, "a finite number > 0, != 1: the factor on the update")},
    "malformed": {},
    "replay": {},
}


@dataclass(frozen=True)
class AdversaryConfig:
    """One ``[[adversary]]`` table: clients that misbehave, and how (``clients/adversaries.py``).

    A test of the auditor and of robust strategies, not a threat model of fedpriv's own
    clients: an adversary trains and replies through fedpriv's ClientApp, wrapped in a Flower
    client mod that changes what it trains with or what it says.
    """

    clients: list[int] = rule("a non-empty list of client ids", bool, default_factory=list)
    behaviour: str = rule(*_one_of(*ADVERSARY_BEHAVIOURS), default="no-noise")
    factor: float | None = rule("a number > 0 (see the behaviour)", _positive, default=None)

    def value(self) -> float | None:
        """The behaviour's factor (its default when unset; None for a behaviour without one)."""
        spec = ADVERSARY_BEHAVIOURS[self.behaviour].get("factor")
        return None if spec is None else spec[0] if self.factor is None else self.factor


#: Flower strategy → the ``[strategy]`` parameters it takes (Flower's own defaults when unset).
STRATEGY_PARAMETERS: dict[str, tuple[str, ...]] = {
    "fedavg": (),
    "fedavgm": ("server_learning_rate", "server_momentum"),
    "fedprox": ("proximal_mu",),
    "fedadam": ("eta", "eta_l", "beta_1", "beta_2", "tau"),
    "fedyogi": ("eta", "eta_l", "beta_1", "beta_2", "tau"),
    "fedadagrad": ("eta", "eta_l", "tau"),
    "fedmedian": (),
    "fedtrimmedavg": ("beta",),
    "krum": ("num_malicious_nodes",),
    "multikrum": ("num_malicious_nodes", "num_nodes_to_select"),
    "bulyan": ("num_malicious_nodes",),
}


def _unit_interval(v: Any) -> bool:
    return 0 <= v < 1


@dataclass(frozen=True)
class StrategyConfig:
    """``[strategy]``: the Flower strategy that aggregates, wrapped by the auditing server.

    Every reply is audited before the strategy sees it; rejected replies never reach it.
    Parameters left unset take Flower's defaults; setting one the chosen strategy does not take
    is an error.
    """

    name: str = rule(*_one_of(*STRATEGY_PARAMETERS), default="fedavg")
    server_learning_rate: float | None = rule("a number > 0", _positive, default=None)
    server_momentum: float | None = rule("a number in [0, 1)", _unit_interval, default=None)
    proximal_mu: float | None = rule("a number >= 0", lambda v: v >= 0, default=None)
    eta: float | None = rule("a number > 0 (server learning rate)", _positive, default=None)
    eta_l: float | None = rule("a number > 0 (client learning rate)", _positive, default=None)
    beta_1: float | None = rule("a number in [0, 1)", _unit_interval, default=None)
    beta_2: float | None = rule("a number in [0, 1)", _unit_interval, default=None)
    tau: float | None = rule("a number > 0 (adaptivity)", _positive, default=None)
    beta: float | None = rule("a number in (0, 0.5) (fraction trimmed at each end)",
                              lambda v: 0 < v < 0.5, default=None)
    num_malicious_nodes: int | None = rule("an integer >= 0", lambda v: v >= 0, default=None)
    num_nodes_to_select: int | None = rule("an integer >= 1", _positive, default=None)
    join_timeout: float = rule("a number of seconds > 0 to wait for every node before round 1",
                               _positive, default=600.0)
    round_timeout: float = rule("a number of seconds > 0 to wait for a round's replies",
                                _positive, default=3600.0)

    def params(self) -> dict[str, Any]:
        """The chosen strategy's parameters that are set."""
        return {k: getattr(self, k) for k in STRATEGY_PARAMETERS[self.name]
                if getattr(self, k) is not None}


@dataclass(frozen=True)
class SimulationConfig:
    """``[simulation]``: the Ray backend of Flower's simulation engine."""

    ray_cpus: int = rule(*_count(1, 4096, " (ignored with ray_address)"), default=2)
    client_cpus: float = rule("a number in (0, 4096]", lambda v: 0 < v <= 4096, default=1.0)
    ray_address: str = rule(
        'empty (start a private Ray) or a Ray cluster address such as "auto" or "10.0.0.5:6379"',
        default="",
    )


def _distinct_positive(values: list[float]) -> bool:
    return len(set(values)) == len(values) and all(math.isfinite(v) and v > 0 for v in values)


def _subset_of(*choices: str) -> tuple[str, Check]:
    allowed = f"a non-empty list of distinct names from {list(choices)}"
    return allowed, lambda v: bool(v) and len(set(v)) == len(v) and set(v) <= set(choices)


def _baselines() -> list[str]:
    """Registered mechanisms without a formal guarantee (``none``, ``clip``)."""
    return [name for name in mechanism_names() if name not in accountable()]


def parameter_list_keys() -> dict[str, str]:
    """``[sweep]`` key of each accountable mechanism's explicit parameter list (its parameter's
    name, plural: ``noise_multipliers``, ``kappas``, ``laplace_scales``) → the mechanism."""
    return {f"{release_class(name).parameter_name}s": name for name in accountable()}


@dataclass(frozen=True)
class SweepConfig:
    """``[sweep]``: mechanisms compared at matched ε or at given noise parameters, over batch
    sizes and seeds (``fedpriv sweep``, :mod:`workflows.sweep`).

    Cells: for every mechanism of ``mechanisms``, one per target ε of ``epsilons`` (the noise
    parameter calibrated with the run's own sampling rate, release count and ``audit.delta``)
    and one per value of its explicit parameter list (``noise_multipliers``, ``kappas``,
    ``laplace_scales``: keys named after each accountable mechanism's parameter in the
    registry, held in :attr:`parameters`), plus one per mechanism of ``baselines`` (no formal
    guarantee); each at every batch size of ``batch_sizes`` (default ``train.batch_size``),
    and each run once per seed of ``seeds`` (default ``seed``). ``epochs``, when set, fixes the
    length of training in passes over the largest client's records instead of
    ``train.local_steps``. ``attack_on`` says which release the server attacks: the round-1
    update of the first ``attack_clients`` clients, or — ``"first-release"`` — the first noisy
    release of training, shown to the server by a one-step probe (:mod:`workflows.sweep.plan`).
    """

    epsilons: list[float] = rule(
        "a list of distinct finite numbers > 0", _distinct_positive,
        default_factory=lambda: [1.0, 10.0, 100.0],
    )
    mechanisms: list[str] = rule(
        *_subset_of(*accountable()), default_factory=lambda: ["gaussian", "vmf"]
    )
    parameters: dict[str, list[float]] = field(default_factory=dict)
    baselines: list[str] = rule(
        f"a list of distinct names from {_baselines()}",
        lambda v: len(set(v)) == len(v) and set(v) <= set(_baselines()), default_factory=list,
    )
    batch_sizes: list[int] = rule(
        "a list of distinct integers >= 1 (empty: train.batch_size)", _distinct_positive,
        default_factory=list,
    )
    seeds: list[int] = rule(
        f"a list of distinct integers in [0, {MAX_SEED}] (empty: the top-level seed)",
        lambda v: len(set(v)) == len(v) and all(_seed(s) for s in v), default_factory=list,
    )
    epochs: float | None = rule(
        "a number > 0: expected passes over the largest client's records in the whole run "
        "(sets train.local_steps per batch size)", _positive, default=None,
    )
    attack: str = rule("an attack name (checked against the attack registry)", bool,
                       default="iga")
    attack_iterations: int = rule(*_count(1, 1_000_000), default=2000)
    attack_clients: int = rule("an integer >= 1 (at most data.num_clients)", _positive, default=1)
    attack_on: str = rule(*_one_of("round-1-update", "first-release"), default="round-1-update")

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], prefix: str) -> SweepConfig:
        """Validate a ``[sweep]`` table: the explicit parameter lists by the registry, the rest
        field by field."""
        if not isinstance(raw, Mapping):
            raise InputError(prefix.rstrip("."), raw, "a table")
        rest, parameters = dict(raw), {}
        known = {f.name for f in dataclasses.fields(cls)} - {"parameters"}
        known |= set(parameter_list_keys())
        unknown = sorted(set(rest) - known)
        if unknown:
            raise InputError(f"{prefix}{unknown[0]}", rest[unknown[0]],
                             f"a known key: one of {sorted(known)}")
        for key, mechanism in parameter_list_keys().items():
            if key in rest:
                parameters[mechanism] = _parameter_list(f"{prefix}{key}", rest.pop(key))
        return dataclasses.replace(_build(cls, rest, prefix), parameters=parameters)

    def to_dict(self) -> dict[str, Any]:
        """The flat table again (explicit lists under their own keys)."""
        out = _drop_none(dataclasses.asdict(self))
        out.pop("parameters")
        keys = {mechanism: key for key, mechanism in parameter_list_keys().items()}
        out.update({keys[m]: list(values) for m, values in self.parameters.items()})
        return out

    def check(self) -> None:
        """Every explicit list belongs to a swept mechanism and every swept mechanism has a
        cell (a target ε or a parameter list)."""
        keys = {mechanism: key for key, mechanism in parameter_list_keys().items()}
        for mechanism, values in self.parameters.items():
            if mechanism not in self.mechanisms:
                raise InputError(f"sweep.{keys[mechanism]}", values,
                                 f"unset unless sweep.mechanisms lists {mechanism!r}")
        if not self.epsilons:
            bare = [m for m in self.mechanisms if m not in self.parameters]
            if bare:
                raise InputError("sweep.epsilons", [], f"a non-empty list, or set "
                                 f"sweep.{keys[bare[0]]} for {bare[0]!r}")


def _parameter_list(key: str, value: Any) -> list[float]:
    allowed = "a non-empty list of distinct finite numbers > 0"
    if not (isinstance(value, list) and value and _finite(value)
            and all(_type_ok(v, float) for v in value) and _distinct_positive(value)):
        raise InputError(key, value, allowed)
    return [float(v) for v in value]


@dataclass(frozen=True)
class Config:
    """A whole, validated experiment configuration."""

    seed: int = rule(f"an integer in [0, {MAX_SEED}]", _seed, default=0)
    rounds: int = rule(*_count(1, 1_000_000), default=10)
    device: str = rule(*_one_of(*DEVICES), default="cpu")  # fedpriv.devices: training, attacks
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    adversary: list[AdversaryConfig] = field(default_factory=list)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (TOML/JSON-serialisable, ``None`` dropped)."""
        out = _drop_none(dataclasses.asdict(self))
        out["mechanism"] = self.mechanism.to_dict()
        out["sweep"] = self.sweep.to_dict()
        return out

    def to_json(self) -> str:
        """Compact JSON of :meth:`to_dict` (how the server ships the config to clients)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Config:
        """Inverse of :meth:`to_json`, validating again — once per process for each distinct
        text (a client receives the same config with every message of a run)."""
        return _config_from_json(text)


@functools.lru_cache(maxsize=8)
def _config_from_json(text: str) -> Config:
    return config_from_dict(json.loads(text))


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


# ---------------------------------------------------------------- validation


def _type_ok(value: Any, annotation: Any) -> bool:
    """Whether ``value`` (from TOML/JSON) fits the field annotation."""
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        return any(_type_ok(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    raise TypeError(f"unsupported annotation {annotation!r}")


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (a number or a list of them)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return all(_finite(v) for v in value) if isinstance(value, list) else True


def _type_name(annotation: Any) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        parts = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(parts)
    if origin is list:
        return "a list"
    return names.get(annotation, str(annotation))


def _build(cls: type, raw: Mapping[str, Any], prefix: str) -> Any:
    """Validate ``raw`` against dataclass ``cls``; recurse into nested sections."""
    if not isinstance(raw, Mapping):
        raise InputError(prefix.rstrip("."), raw, "a table")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        key = unknown[0]
        raise InputError(f"{prefix}{key}", raw[key], f"a known key: one of {sorted(fields)}")
    values: dict[str, Any] = {}
    for name, value in raw.items():
        key, annotation = f"{prefix}{name}", hints[name]
        if hasattr(annotation, "from_raw"):
            values[name] = annotation.from_raw(value, f"{key}.")
            continue
        if dataclasses.is_dataclass(annotation):
            values[name] = _build(annotation, value, f"{key}.")
            continue
        item = (typing.get_args(annotation) or [None])[0]
        if typing.get_origin(annotation) is list and dataclasses.is_dataclass(item):
            if not isinstance(value, list):
                raise InputError(key, value, "a list of tables")
            values[name] = [_build(item, v, f"{key}[{i}].") for i, v in enumerate(value)]
            continue
        meta = fields[name].metadata
        if not _type_ok(value, annotation):
            raise InputError(key, value, f"{_type_name(annotation)}: {meta['allowed']}")
        if not _finite(value):
            raise InputError(key, value, f"finite numbers: {meta['allowed']}")
        if annotation is float or float in typing.get_args(annotation):
            value = float(value) if isinstance(value, int) else value
        if value is not None and meta["check"] is not None and not meta["check"](value):
            raise InputError(key, value, meta["allowed"])
        values[name] = value
    return cls(**values)


def _check_overrides(cfg: Config) -> None:
    """Validate ``[[mechanism.overrides]]`` and build every distinct mechanism the clients use
    once (clients sharing a mechanism share the check: O(overrides), not O(clients))."""
    from fedpriv.mechanisms import build_mechanism

    for i, override in enumerate(cfg.mechanism.overrides):
        key = f"mechanism.overrides[{i}]"
        clients = override.get("clients")
        if not (isinstance(clients, list) and clients and all(_type_ok(c, int) for c in clients)):
            raise InputError(f"{key}.clients", clients, "a non-empty list of client ids")
        bad = [c for c in clients if not 0 <= c < cfg.data.num_clients]
        if bad:
            raise InputError(f"{key}.clients", bad, f"ids in [0, {cfg.data.num_clients - 1}]")
        table = {k: v for k, v in override.items() if k != "clients"}
        MechanismConfig.from_raw(table, f"{key}.")
    seen = set()
    for client_id in range(cfg.data.num_clients if cfg.mechanism.overrides else 1):
        name, params = cfg.mechanism.for_client(client_id)
        distinct = json.dumps([name, params], sort_keys=True)
        if distinct not in seen:
            seen.add(distinct)
            build_mechanism(name, params, key_prefix="mechanism")


def _check_adversaries(cfg: Config) -> None:
    """Each ``[[adversary]]``: client ids in range, each client in one table at most, and the
    behaviour's factor in its range (or unset where the behaviour takes none)."""
    seen: set[int] = set()
    for i, adversary in enumerate(cfg.adversary):
        key = f"adversary[{i}]"
        bad = [c for c in adversary.clients
               if not isinstance(c, int) or not 0 <= c < cfg.data.num_clients or c in seen]
        if bad or not adversary.clients:
            raise InputError(f"{key}.clients", adversary.clients,
                             f"distinct client ids in [0, {cfg.data.num_clients - 1}], each "
                             "in one [[adversary]] table")
        seen.update(adversary.clients)
        spec = ADVERSARY_BEHAVIOURS[adversary.behaviour].get("factor")
        if spec is None and adversary.factor is not None:
            raise InputError(f"{key}.factor", adversary.factor,
                             f"unset: {adversary.behaviour} takes no factor")
        factor = adversary.value()
        low_high = {"under-noise": (0, 1), "false-sample-rate": (0, 1)}.get(adversary.behaviour)
        if factor is not None and ((low_high and not low_high[0] < factor < low_high[1])
                                   or factor == 1.0):
            raise InputError(f"{key}.factor", factor, spec[1])


def _check_canaries(cfg: Config) -> None:
    """Canaries need the auditor (it removes them from the updates) and plain SGD steps (whose
    share of them it can remove), and the Gaussian-DP estimators need Gaussian releases (on
    others they overshoot: docs/canaries.md)."""
    canaries = cfg.audit.canaries
    if not canaries.enabled:
        return
    if not cfg.audit.enabled:
        raise InputError("audit.canaries.enabled", True,
                         "false while audit.enabled = false (the auditor removes the canaries "
                         "from the updates before aggregating)")
    if cfg.train.optimizer != "sgd" or cfg.train.momentum:
        key, value = (("train.optimizer", cfg.train.optimizer) if cfg.train.optimizer != "sgd"
                      else ("train.momentum", cfg.train.momentum))
        raise InputError(key, value, "plain SGD (optimizer = 'sgd', momentum = 0) while "
                         "audit.canaries.enabled = true: the server removes the canaries' "
                         "share −η·k·Σc/L, which Adam's scaling or a momentum buffer would change")
    if canaries.method in _GAUSSIAN_ONLY:
        clients = range(cfg.data.num_clients if cfg.mechanism.overrides else 1)
        names = sorted({cfg.mechanism.for_client(c)[0] for c in clients} - {"gaussian"})
        if names:
            raise InputError("audit.canaries.method", canaries.method,
                             f"one-run or clopper-pearson: {canaries.method} assumes Gaussian "
                             f"releases, and clients use {names}")


def config_from_dict(raw: Mapping[str, Any]) -> Config:
    """Validate a nested mapping (a parsed TOML document) into a :class:`Config`."""
    cfg = _build(Config, raw, "")
    _check_overrides(cfg)
    _check_optimizer(cfg.train)
    if cfg.audit.clients != "all" and isinstance(cfg.audit.clients, list):
        bad = [c for c in cfg.audit.clients if not 0 <= c < cfg.data.num_clients]
        if bad:
            raise InputError("audit.clients", bad, f"ids in [0, {cfg.data.num_clients - 1}]")
    _check_adversaries(cfg)
    _check_canaries(cfg)
    own = STRATEGY_PARAMETERS[cfg.strategy.name]
    for key in STRATEGY_PARAMETERS:
        for param in STRATEGY_PARAMETERS[key]:
            if param not in own and getattr(cfg.strategy, param) is not None:
                raise InputError(f"strategy.{param}", getattr(cfg.strategy, param),
                                 f"unset: not a parameter of {cfg.strategy.name} (its "
                                 f"parameters: {list(own) or 'none'})")
    cfg.sweep.check()
    if cfg.sweep.attack_clients > cfg.data.num_clients:
        raise InputError(
            "sweep.attack_clients", cfg.sweep.attack_clients,
            f"an integer in [1, data.num_clients = {cfg.data.num_clients}]",
        )
    return cfg


# ---------------------------------------------------------------- loading and overrides


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``KEY=VALUE``; the value is read as TOML (``0.1``, ``true``, ``[0, 1]``, ``"s"``)
    and as a bare string if it is not valid TOML (so ``data.name=mnist`` works)."""
    key, sep, raw = text.partition("=")
    key = key.strip().strip('"')
    if not sep or not all(key.split(".")):  # no empty key, section or leaf
        raise InputError("--set", text, "KEY=VALUE, e.g. train.lr=0.1")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


def apply_override(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted ``key`` in the nested dict ``raw`` (creating sections as needed)."""
    *sections, leaf = key.split(".")
    node = raw
    for i, section in enumerate(sections):
        child = node.setdefault(section, {})
        if not isinstance(child, dict):
            raise InputError(".".join(sections[: i + 1]), child, "a table, not a value")
        node = child
    node[leaf] = value


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Read a TOML preset (or the defaults when ``path`` is None), apply ``KEY=VALUE``
    overrides, and validate everything.

    Raises
    ------
    InputError
        For a missing or unreadable file, a TOML syntax error, or any invalid key or value.
    """
    raw: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise InputError("CONFIG", str(p), "an existing TOML file")
        try:
            raw = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError("CONFIG", str(p), f"valid TOML ({exc})") from None
    for text in overrides:
        apply_override(raw, *parse_override(text))
    return config_from_dict(raw)
