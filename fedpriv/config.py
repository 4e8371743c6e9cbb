"""The run's configuration: TOML presets, ``--set`` overrides, validation before any work.

A configuration is a tree of frozen sections (:mod:`fedpriv.schema`), each declared beside the
component that reads it: ``[data]`` (:mod:`fedpriv.data.config`), ``[model]``
(:mod:`fedpriv.models.config`), ``[train]`` (:mod:`fedpriv.training.config`), ``[mechanism]``
(:mod:`fedpriv.mechanisms.config`), ``[audit]`` and ``[audit.canaries]``
(:mod:`fedpriv.audit.config`). :class:`Config` holds them with the run-wide ``seed``,
``rounds`` and ``device``, and checks what spans sections (client ids against
``data.num_clients``, canaries against the optimiser and the mechanisms).

The application adds its own sections (the Flower strategy, the adversaries, the simulation
backend, the sweep) with :func:`register_section` where it assembles the run's config; the
library never imports the application. A section that is not registered in this process is
an unknown key, unless the caller names it in ``carried``: then it is kept as its raw table,
unread, for the process that reads it (a ServerApp carries the clients' ``[[adversary]]``;
a ClientApp keeps the sections the server validated, :meth:`Config.from_json`).

:func:`load_config` checks every key of the TOML document (unknown keys, wrong types, values
out of range) and raises :class:`~fedpriv.errors.InputError` naming the dotted key, the value
and what is allowed. The same dotted keys work as ``fedpriv simulate --set train.lr=0.1`` and
as Flower run config (``flwr run . -c '"train.lr"=0.1'``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpriv.audit.config import GAUSSIAN_ONLY_METHODS, AuditConfig
from fedpriv.data.config import DataConfig
from fedpriv.devices import DEVICES
from fedpriv.errors import InputError
from fedpriv.mechanisms.config import MechanismConfig
from fedpriv.models.config import ModelConfig
from fedpriv.schema import (
    MAX_SEED,
    Entry,
    apply_override,
    bounded_count,
    build_field,
    build_list,
    build_section,
    check_depth,
    drop_none,
    field_entries,
    one_of,
    parse_override,
    read_toml,
    rule,
    section_entries,
    seed_ok,
)
from fedpriv.training.config import TrainConfig, check_optimizer

__all__ = [
    "Config",
    "MAX_ROUNDS",
    "Section",
    "config_entries",
    "config_from_dict",
    "load_config",
    "register_section",
    "section_names",
]


@dataclass(frozen=True)
class Section:
    """An application section registered into the run's config (:func:`register_section`)."""

    name: str
    cls: type
    many: bool = False
    check: Callable[[Config], None] | None = None

    def default(self) -> Any:
        """The section's value when the document leaves it out."""
        return [] if self.many else self.cls()

    def build(self, raw: Any) -> Any:
        """Validate the section's raw table (a list of tables when ``many``)."""
        if self.many:
            return build_list(self.cls, raw, self.name)
        if hasattr(self.cls, "from_raw"):
            return self.cls.from_raw(raw, f"{self.name}.")
        return build_section(self.cls, raw, f"{self.name}.")

    def to_raw(self, value: Any) -> Any:
        """The section's value as a plain table again (``None`` dropped). A value still plain —
        carried unread because the section was registered after the config was loaded (a
        ClientApp imported beside the ServerApp, as ``flwr run .`` does) — is returned as is."""
        if isinstance(value, Mapping) or (
                isinstance(value, list) and not all(map(dataclasses.is_dataclass, value))):
            return value
        if self.many:
            return [drop_none(dataclasses.asdict(v)) for v in value]
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return drop_none(dataclasses.asdict(value))


_SECTIONS: dict[str, Section] = {}

#: Most rounds a run may have (``rounds``; ``fedpriv audit --rounds``).
MAX_ROUNDS = 1_000_000


def register_section(name: str, cls: type, *, many: bool = False,
                     check: Callable[[Config], None] | None = None) -> None:
    """Add the section ``[name]`` (``[[name]]`` with ``many``), validated by the frozen
    dataclass ``cls`` (:mod:`fedpriv.schema`), to every config built in this process.

    Parameters
    ----------
    name
        The top-level key; ``cfg.<name>`` reads it.
    cls
        The section dataclass; one with ``from_raw(raw, prefix)`` validates itself.
    many
        An array of tables: ``cfg.<name>`` is a list of ``cls``.
    check
        Checks that span sections, called with the built :class:`Config`; raises
        :class:`~fedpriv.errors.InputError`.

    Raises
    ------
    ValueError
        If ``name`` is a library key or already names a different section.
    """
    if name in _LIBRARY_KEYS:
        raise ValueError(f"{name!r} is a key of the library's config")
    section = Section(name, cls, many, check)
    if _SECTIONS.setdefault(name, section) != section:
        raise ValueError(f"section {name!r} is already registered as {_SECTIONS[name].cls!r}")


def section_names() -> list[str]:
    """Every top-level key this process validates: the library's, then the registered ones."""
    return [*_LIBRARY_KEYS, *_SECTIONS]


def config_entries() -> list[Entry]:
    """Every key of the run's config this process validates (the config reference: the
    library's keys, then each registered section's by name — the order the application's
    modules happened to be imported in must not reorder ``docs/config.md``)."""
    entries = field_entries(Config, "", skip=("sections",))
    for name, section in sorted(_SECTIONS.items()):
        entries += section_entries(section.cls, f"{name}[i]." if section.many else f"{name}.")
    return entries


def _registered_defaults(registry: Mapping[str, Section] | None = None) -> dict[str, Any]:
    registry = _SECTIONS if registry is None else registry
    return {name: section.default() for name, section in registry.items()}


@dataclass(frozen=True)
class Config:
    """A whole, validated experiment configuration.

    ``sections`` holds the application's sections by name (:func:`register_section`), read as
    attributes: ``cfg.strategy``. A section carried unread (``carried`` in
    :func:`config_from_dict`) is its raw table.
    """

    seed: int = rule(f"an integer in [0, {MAX_SEED}]", seed_ok, default=0,
                     doc="The run's seed: partition, initial model, canaries; a client's "
                         "batches and noise only where its side opts in (fedpriv simulate's "
                         "clients do: reproducible runs; a node: --node-config "
                         "'fedpriv-reproducible-noise=true'), and the server can then re-draw "
                         "and remove that noise; otherwise they are the client's secret.")
    rounds: int = rule(*bounded_count(1, MAX_ROUNDS), default=10,
                       doc="Federated rounds the run trains.")
    device: str = rule(*one_of(*DEVICES), default="cpu",
                       doc="Where training and attacks run (fedpriv.devices).")
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    sections: dict[str, Any] = field(default_factory=_registered_defaults)

    def __getattr__(self, name: str) -> Any:
        sections = self.__dict__.get("sections", {})
        if name in sections:
            return sections[name]
        raise AttributeError(f"{type(self).__name__!r} has no section {name!r} (registered: "
                             f"{list(_SECTIONS)})")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (TOML/JSON-serialisable, ``None`` dropped): the library's keys,
        then the application's sections by name (whatever order they were registered in)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "sections"}
        out = drop_none({k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
                         for k, v in out.items()})
        out["mechanism"] = self.mechanism.to_dict()
        for name, value in sorted(self.sections.items()):
            section = _SECTIONS.get(name)
            out[name] = value if section is None else section.to_raw(value)
        return out

    def to_json(self) -> str:
        """Compact JSON of :meth:`to_dict` (how the server ships the config to clients)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Config:
        """Inverse of :meth:`to_json`, validating again — once per process for each distinct
        text (a client receives the same config with every message of a run). Sections not
        registered in this process are kept unread: the sender validated them."""
        return _config_from_json(text)


_LIBRARY_KEYS = tuple(f.name for f in dataclasses.fields(Config) if f.name != "sections")


@functools.lru_cache(maxsize=8)
def _config_from_json(text: str) -> Config:
    raw = json.loads(text)
    return config_from_dict(raw, carried=set(raw) - set(section_names()))


def _check_audit_clients(cfg: Config) -> None:
    """An explicit ``audit.clients`` list names clients that exist."""
    if isinstance(cfg.audit.clients, list):
        bad = [c for c in cfg.audit.clients if not 0 <= c < cfg.data.num_clients]
        if bad:
            raise InputError("audit.clients", bad, f"ids in [0, {cfg.data.num_clients - 1}]")


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
    if canaries.method in GAUSSIAN_ONLY_METHODS:
        names = sorted(cfg.mechanism.names(cfg.data.num_clients) - {"gaussian"})
        if names:
            raise InputError("audit.canaries.method", canaries.method,
                             f"one-run or clopper-pearson: {canaries.method} assumes Gaussian "
                             f"releases, and clients use {names}")


def _check_release(cfg: Config) -> None:
    """Steps mode (``audit.release = "steps"``) needs the auditor, which checks and strips the
    releases before aggregating, and record-level mechanisms: a client-level one trains with
    plain steps whose "releases" would be raw gradients."""
    if cfg.audit.release != "steps":
        return
    if not cfg.audit.enabled:
        raise InputError("audit.release", "steps", "'update' while audit.enabled = false (the "
                         "auditor checks the step releases and removes them before aggregating)")
    from fedpriv.mechanisms.registry import mechanism_class

    client_level = sorted(n for n in cfg.mechanism.names(cfg.data.num_clients)
                          if mechanism_class(n).level == "client")
    if client_level:
        raise InputError("audit.release", "steps", f"'update' with client-level mechanisms "
                         f"{client_level}: their local steps are not privatised one by one")


def config_from_dict(raw: Mapping[str, Any], *, carried: Collection[str] = ()) -> Config:
    """Validate a nested mapping (a parsed TOML document) into a :class:`Config`.

    Parameters
    ----------
    raw
        The document.
    carried
        Top-level keys of sections this process does not register but passes on unread, as
        raw tables, to the process that reads them (which validates them there).

    Raises
    ------
    InputError
        For any unknown key, wrong type or value out of range, or a value nested deeper than
        :data:`fedpriv.schema.MAX_DEPTH`, named by its dotted key.
    """
    if not isinstance(raw, Mapping):
        raise InputError("", raw, "a table")
    check_depth(raw)
    # One view of the registry for the whole build: a thread that imports an application
    # module meanwhile (Flower's simulation loads the ClientApp beside the ServerApp) must not
    # add a section whose check then reads a value this build never made.
    registry = dict(_SECTIONS)
    known = [*_LIBRARY_KEYS, *registry, *carried]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        key = unknown[0]
        raise InputError(key, raw[key], f"a known key: one of {sorted(known)}")
    library, sections = {}, _registered_defaults(registry)
    for name, value in raw.items():  # in the document's order, as the sections' own keys
        if name in _LIBRARY_KEYS:
            library[name] = build_field(Config, name, value, "")
        else:
            section = registry.get(name)
            sections[name] = value if section is None else section.build(value)
    cfg = Config(**library, sections=sections)
    cfg.mechanism.check(cfg.data.num_clients)
    check_optimizer(cfg.train)
    _check_audit_clients(cfg)
    _check_canaries(cfg)
    _check_release(cfg)
    for section in registry.values():
        if section.check is not None:
            section.check(cfg)
    return cfg


def load_config(path: str | Path | None, overrides: Sequence[str] = (), *,
                carried: Collection[str] = ()) -> Config:
    """Read a TOML preset (or the defaults when ``path`` is None), apply ``KEY=VALUE``
    overrides, and validate everything (``carried``: as in :func:`config_from_dict`).

    Raises
    ------
    InputError
        For a missing or unreadable file, a TOML syntax error, or any invalid key or value.
    """
    raw = {} if path is None else read_toml(path)
    for text in overrides:
        apply_override(raw, *parse_override(text))
    return config_from_dict(raw, carried=carried)
