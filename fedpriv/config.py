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
import json
import math
import tomllib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpriv.errors import InputError

__all__ = [
    "AuditConfig",
    "Config",
    "DataConfig",
    "MAX_SEED",
    "MechanismConfig",
    "NODE_CONFIG_MECHANISM_KEYS",
    "ModelConfig",
    "SimulationConfig",
    "SweepConfig",
    "TrainConfig",
    "apply_override",
    "config_from_dict",
    "load_config",
    "parse_override",
]

Check = Callable[[Any], bool]


def rule(allowed: str, check: Check | None = None, **kwargs: Any) -> Any:
    """A dataclass field whose value must satisfy ``check``; ``allowed`` says what is allowed."""
    return field(metadata={"allowed": allowed, "check": check}, **kwargs)


def _positive(v: Any) -> bool:
    return v > 0


#: Seeds go to ``torch.manual_seed`` and SQLite INTEGER columns: 63 bits at most.
MAX_SEED = 2**63 - 1


def _seed(v: Any) -> bool:
    return 0 <= v <= MAX_SEED


def _one_of(*choices: str) -> tuple[str, Check]:
    return f"one of {list(choices)}", lambda v: v in choices


@dataclass(frozen=True)
class DataConfig:
    """``[data]``: which data set, where it lives, and how it is split across clients."""

    name: str = rule(*_one_of("digits", "mnist", "fashion-mnist", "cifar10"), default="digits")
    root: str = rule("a directory path", default="data")
    download: bool = rule("true or false", default=False)
    num_clients: int = rule("an integer >= 1", _positive, default=10)
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

    batch_size: int = rule("an integer >= 1", _positive, default=16)
    lr: float = rule("a number > 0", _positive, default=0.5)
    local_steps: int = rule("an integer >= 1", _positive, default=1)
    sampling: str = rule(*_one_of("poisson", "fixed"), default="poisson")
    fraction_train: float = rule("a number in (0, 1]", lambda v: 0 < v <= 1, default=1.0)


@dataclass(frozen=True)
class MechanismConfig:
    """``[mechanism]`` and ``[[mechanism.overrides]]`` (per-client mechanisms by partition id)."""

    name: str = rule(*_one_of("none", "clip", "gaussian", "laplace", "vmf"), default="gaussian")
    clip: float = rule("a number > 0", _positive, default=1.0)
    clip_per_layer: list[float] | None = rule(
        "a non-empty list of numbers > 0, one per layer",
        lambda v: bool(v) and all(c > 0 for c in v),
        default=None,
    )
    noise_multiplier: float = rule("a number >= 0", lambda v: v >= 0, default=1.0)
    laplace_scale: float = rule("a number > 0", _positive, default=1.0)
    kappa: float = rule("a number > 0", _positive, default=100.0)
    vmf_scale: float | None = rule("a number > 0 (default: clip)", _positive, default=None)
    vmf_keep_norm: bool = rule("true or false", default=False)
    overrides: list[dict[str, Any]] = rule(
        "a list of tables with `clients = [ids]` and mechanism keys", default_factory=list
    )

    def params(self) -> dict[str, Any]:
        """The mechanism parameters (everything but ``name`` and ``overrides``), unset dropped."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("name", "overrides"):
            out.pop(key)
        return {k: v for k, v in out.items() if v is not None}

    def for_client(self, client_id: int) -> tuple[str, dict[str, Any]]:
        """``(name, params)`` of the mechanism client ``client_id`` uses (last override wins)."""
        name, params = self.name, self.params()
        for override in self.overrides:
            if client_id in override["clients"]:
                extra = {k: v for k, v in override.items() if k != "clients"}
                name = extra.pop("name", name)
                params.update(extra)
        return name, params


@dataclass(frozen=True)
class AuditConfig:
    """``[audit]``: what the honest-but-curious server logs, tallies and attacks."""

    enabled: bool = rule("true or false", default=True)
    delta: float = rule("a number in (0, 1)", lambda v: 0 < v < 1, default=1e-5)
    accountant: str = rule(*_one_of("rdp", "pld"), default="rdp")
    threat_model: str = rule(*_one_of("record", "batch"), default="record")
    ground_truth: bool = rule("true or false", default=True)
    attacks: list[str] = rule(
        "a list of attack names from ['dlg', 'idlg', 'iga']",
        lambda v: all(a in ("dlg", "idlg", "iga") for a in v),
        default_factory=list,
    )
    every: int = rule("an integer >= 1", _positive, default=1)
    clients: str | int | list[int] = rule(
        '"all", a number of clients >= 1, or a list of client ids',
        lambda v: v == "all" if isinstance(v, str) else (v >= 1 if isinstance(v, int) else True),
        default="all",
    )
    iterations: int = rule("an integer >= 1", _positive, default=2000)
    restarts: int = rule("an integer >= 1", _positive, default=1)
    tv_weight: float = rule("a number >= 0 (IGA's total-variation weight)", lambda v: v >= 0,
                            default=0.2)
    seed: int = rule(f"an integer in [0, {MAX_SEED}]", _seed, default=0)
    executor: str = rule(*_one_of("inline", "ray"), default="inline")
    bayes_runs: int = rule("an integer >= 0 (0 disables the estimate)", lambda v: v >= 0, default=0)
    bayes_threshold: float = rule("a number in (0, 1]", lambda v: 0 < v <= 1, default=0.5)
    bayes_smoothing: float = rule("a number >= 0", lambda v: v >= 0, default=1.0)
    bayes_distractors: int = rule("an integer >= 0", lambda v: v >= 0, default=15)


#: Mechanism keys a SuperNode can set in ``--node-config`` (Flower's dashed style), mapped to
#: the ``[mechanism]`` key they override; the ClientApp reads them, ``deploy-local`` writes them.
NODE_CONFIG_MECHANISM_KEYS: dict[str, str] = {
    "mechanism": "name",
    "clip": "clip",
    "noise-multiplier": "noise_multiplier",
    "laplace-scale": "laplace_scale",
    "kappa": "kappa",
    "vmf-scale": "vmf_scale",
}


@dataclass(frozen=True)
class SimulationConfig:
    """``[simulation]``: the Ray backend of Flower's simulation engine."""

    ray_cpus: int = rule("an integer >= 1 (ignored with ray_address)", _positive, default=2)
    client_cpus: float = rule("a number > 0", _positive, default=1.0)
    ray_address: str = rule(
        'empty (start a private Ray) or a Ray cluster address such as "auto" or "10.0.0.5:6379"',
        default="",
    )


def _epsilons_ok(values: list[float]) -> bool:
    return bool(values) and len(set(values)) == len(values) and all(
        math.isfinite(v) and v > 0 for v in values
    )


def _subset_of(*choices: str) -> tuple[str, Check]:
    allowed = f"a non-empty list of distinct names from {list(choices)}"
    return allowed, lambda v: bool(v) and len(set(v)) == len(v) and set(v) <= set(choices)


@dataclass(frozen=True)
class SweepConfig:
    """``[sweep]``: mechanisms compared at matched ε (``fedpriv sweep``, :mod:`workflows.sweep`).

    For every target ε and mechanism the noise parameter is calibrated with the run's own
    sampling rate, release count and ``audit.delta``; the first round's updates of the first
    ``attack_clients`` clients are attacked with ``attack`` for ``attack_iterations`` steps.
    """

    epsilons: list[float] = rule(
        "a non-empty list of distinct finite numbers > 0", _epsilons_ok,
        default_factory=lambda: [1.0, 10.0, 100.0],
    )
    mechanisms: list[str] = rule(
        *_subset_of("gaussian", "vmf", "laplace"), default_factory=lambda: ["gaussian", "vmf"]
    )
    attack: str = rule(*_one_of("iga", "dlg", "idlg"), default="iga")
    attack_iterations: int = rule("an integer >= 1", _positive, default=2000)
    attack_clients: int = rule("an integer >= 1 (at most data.num_clients)", _positive, default=1)


@dataclass(frozen=True)
class Config:
    """A whole, validated experiment configuration."""

    seed: int = rule(f"an integer in [0, {MAX_SEED}]", _seed, default=0)
    rounds: int = rule("an integer >= 1", _positive, default=10)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    simulation: SimulationConfig = field(default_factory=SimulationConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (TOML/JSON-serialisable, ``None`` dropped)."""
        return _drop_none(dataclasses.asdict(self))

    def to_json(self) -> str:
        """Compact JSON of :meth:`to_dict` (how the server ships the config to clients)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Config:
        """Inverse of :meth:`to_json`, validating again."""
        return config_from_dict(json.loads(text))


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
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
        if dataclasses.is_dataclass(annotation):
            values[name] = _build(annotation, value, f"{key}.")
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
    """Validate ``[[mechanism.overrides]]`` and build every client's mechanism once."""
    from fedpriv.mechanisms import build_mechanism

    mech_keys = {f.name for f in dataclasses.fields(MechanismConfig)} - {"overrides"}
    for i, override in enumerate(cfg.mechanism.overrides):
        key = f"mechanism.overrides[{i}]"
        clients = override.get("clients")
        if not (isinstance(clients, list) and clients and all(_type_ok(c, int) for c in clients)):
            raise InputError(f"{key}.clients", clients, "a non-empty list of client ids")
        bad = [c for c in clients if not 0 <= c < cfg.data.num_clients]
        if bad:
            raise InputError(f"{key}.clients", bad, f"ids in [0, {cfg.data.num_clients - 1}]")
        extra = sorted(set(override) - mech_keys - {"clients"})
        if extra:
            raise InputError(f"{key}.{extra[0]}", override[extra[0]], f"one of {sorted(mech_keys)}")
        _build(MechanismConfig, {k: v for k, v in override.items() if k != "clients"}, f"{key}.")
    for client_id in range(cfg.data.num_clients):
        name, params = cfg.mechanism.for_client(client_id)
        build_mechanism(name, params, key_prefix="mechanism")


def config_from_dict(raw: Mapping[str, Any]) -> Config:
    """Validate a nested mapping (a parsed TOML document) into a :class:`Config`."""
    cfg = _build(Config, raw, "")
    _check_overrides(cfg)
    if cfg.audit.clients != "all" and isinstance(cfg.audit.clients, list):
        bad = [c for c in cfg.audit.clients if not 0 <= c < cfg.data.num_clients]
        if bad:
            raise InputError("audit.clients", bad, f"ids in [0, {cfg.data.num_clients - 1}]")
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
