"""``[mechanism]``: each client's mechanism by name and parameters, and its ε budget.

The table is checked by the mechanisms' own declarations (:mod:`fedpriv.mechanisms.registry`):
no parameter name is written here.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fedpriv.errors import InputError
from fedpriv.mechanisms.base import parameter_fields
from fedpriv.mechanisms.registry import (
    accountable,
    build_mechanism,
    mechanism_class,
    mechanism_names,
    parameter_field,
    parameter_names,
    release_class,
)
from fedpriv.schema import (
    Entry,
    build_section,
    default_text,
    drop_none,
    one_of,
    positive,
    rule,
    section_entries,
    type_name,
    type_ok,
)
from fedpriv.validate import check_positive

__all__ = ["BUDGET_KEY", "TARGET_KEY", "CalibrationRecord", "MechanismConfig",
           "node_config_keys"]

BUDGET_KEY = "epsilon_budget"
"""The ``[mechanism]`` key (and override key) of a client's ε budget."""
TARGET_KEY = "target_epsilon"
"""The ``[mechanism]`` key of the ε the run's noise parameter is calibrated to."""
_RECORD_KEY = "calibration"


@dataclass(frozen=True)
class CalibrationRecord:
    """``[mechanism.calibration]``: what the run made of ``mechanism.target_epsilon``.

    Written by the run (:func:`fedpriv.calibration.calibrate_target`), not by hand: the run's
    resolved config carries the calibrated noise parameter and this record in place of the
    target, so the store, ``report.json`` and ``--resume`` read the noise the clients used.
    """

    target_epsilon: float = rule("a number > 0", positive, default=1.0,
                                 doc="Written by the run, not by hand: the target epsilon "
                                     "(mechanism.target_epsilon) its noise was calibrated to.")
    parameter: str = rule("the mechanism's noise parameter", bool, default="noise_multiplier",
                          doc="The parameter calibrated.")
    value: float = rule("a number > 0 (the parameter's value in [mechanism])", positive,
                        default=1.0, doc="The calibrated value.")
    epsilon: float = rule("a number in [0, target_epsilon]", lambda v: v >= 0, default=1.0,
                          doc="The epsilon at audit.delta of the calibrated client's whole run.")
    accountant: str = rule(*one_of("tightest", "rdp", "pld"), default="tightest",
                           doc="The accountant (audit.accountant).")
    client: int = rule("a client id", lambda v: v >= 0, default=0,
                       doc="The client calibrated for: the largest epsilon at a given noise.")
    sample_rate: float = rule("a number in (0, 1]", lambda v: 0 < v <= 1, default=1.0,
                              doc="Its sampling rate q = min(L, n)/n.")
    steps: int = rule("an integer >= 1", positive, default=1,
                      doc="Its releases: rounds x train.local_steps.")
    population: int | None = rule("an integer >= 1", positive, default=None,
                                  doc="Its n under fixed-size batches (unset: Poisson).")


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

    ``target_epsilon`` (default: none) asks the run to calibrate the mechanism's noise
    parameter (σ, λ or κ) to that ε before it starts (:mod:`fedpriv.calibration`); the noise
    parameter is then not set (here or in an override). The run's resolved config holds the
    calibrated value and its record (``calibration``, :class:`CalibrationRecord`) instead.
    """

    name: str = "gaussian"
    params: dict[str, Any] = field(default_factory=dict)
    overrides: list[dict[str, Any]] = field(default_factory=list)
    epsilon_budget: float | None = None
    target_epsilon: float | None = None
    calibration: CalibrationRecord | None = None

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
        target = raw.pop(TARGET_KEY, None)
        if target is not None:
            target = check_positive(f"{prefix}{TARGET_KEY}", target)
        record = raw.pop(_RECORD_KEY, None)
        if record is not None:
            record = build_section(CalibrationRecord, record, f"{prefix}{_RECORD_KEY}.")
        params = _mechanism_params(raw, prefix)
        _check_calibration(name, params, target, record, prefix)
        return cls(name, params, overrides, budget, target, record)

    def noise_parameter(self) -> str:
        """The name of the noise parameter ``target_epsilon`` calibrates."""
        return release_class(self.name, f"mechanism.{TARGET_KEY}").parameter_name

    @classmethod
    def reference(cls, prefix: str) -> list[Entry]:
        """The table's keys for the config reference (:func:`fedpriv.schema.section_entries`):
        ``name``, the budget, every parameter a registered mechanism declares (with the
        mechanisms that take it), and ``[[mechanism.overrides]]``."""
        entries = [
            Entry(f"{prefix}name", "a string", default_text(cls.name),
                  f"one of {mechanism_names()}",
                  "The mechanism every client uses (per client: mechanism.overrides)."),
            Entry(f"{prefix}{BUDGET_KEY}", "a number", "unset", "a number > 0",
                  "The epsilon at audit.delta a client may spend: a client whose next round "
                  "would take it over declines to train."),
            Entry(f"{prefix}{TARGET_KEY}", "a number", "unset", "a number > 0 (with the "
                  "noise parameter unset)", "Calibrate the mechanism's noise parameter before "
                  "the run so that the client with the largest epsilon spends this one over "
                  "the whole run (at audit.delta, by audit.accountant)."),
        ]
        helps = {(c := release_class(n)).parameter_name: c.parameter_help for n in accountable()}
        for name in parameter_names():
            f = parameter_field(name)
            users = [m for m in mechanism_names()
                     if name in {g.name for g in parameter_fields(mechanism_class(m))}]
            hint = typing.get_type_hints(mechanism_class(users[0]))[name]
            doc = f.metadata["doc"] or helps.get(name, "")
            entries.append(Entry(f"{prefix}{name}", type_name(hint), default_text(f.default),
                                 f.metadata["allowed"], f"{doc} ({', '.join(users)})".lstrip()))
        entries.append(Entry(
            f"{prefix}overrides[i].clients", "a list", "unset", "a non-empty list of client ids",
            "The clients this override applies to; its other keys are any [mechanism] key but "
            "overrides (the last override naming a client wins)."))
        return entries + section_entries(CalibrationRecord, f"{prefix}{_RECORD_KEY}.")

    def to_dict(self) -> dict[str, Any]:
        """The flat table again."""
        out = {"name": self.name, **self.params}
        if self.epsilon_budget is not None:
            out[BUDGET_KEY] = self.epsilon_budget
        if self.target_epsilon is not None:
            out[TARGET_KEY] = self.target_epsilon
        if self.calibration is not None:
            out[_RECORD_KEY] = drop_none(dataclasses.asdict(self.calibration))
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

    def source_key(self, client_id: int, name: str) -> str:
        """The config key that sets parameter ``name`` of client ``client_id``'s mechanism:
        the last override of that client that sets it, else ``mechanism.<name>``."""
        key = f"mechanism.{name}"
        for i, override in enumerate(self.overrides):
            if client_id in override["clients"] and name in override:
                key = f"mechanism.overrides[{i}].{name}"
        return key

    def names(self, num_clients: int) -> set[str]:
        """The names of the mechanisms clients ``0 … num_clients − 1`` use."""
        return {self.for_client(c)[0] for c in range(num_clients if self.overrides else 1)}

    def check(self, num_clients: int) -> None:
        """Validate ``[[mechanism.overrides]]`` against ``num_clients`` clients and build every
        distinct mechanism the clients use once (clients sharing a mechanism share the check:
        O(overrides), not O(clients)).

        Raises
        ------
        InputError
            Naming ``mechanism.overrides[i].<key>`` or ``mechanism.<key>``.
        """
        for i, override in enumerate(self.overrides):
            key = f"mechanism.overrides[{i}]"
            self._check_override(override, key)
            clients = override.get("clients")
            if not (isinstance(clients, list) and clients
                    and all(type_ok(c, int) for c in clients)):
                raise InputError(f"{key}.clients", clients, "a non-empty list of client ids")
            bad = [c for c in clients if not 0 <= c < num_clients]
            if bad:
                raise InputError(f"{key}.clients", bad, f"ids in [0, {num_clients - 1}]")
            MechanismConfig.from_raw({k: v for k, v in override.items() if k != "clients"},
                                     f"{key}.")
        seen = set()
        for client_id in range(num_clients if self.overrides else 1):
            name, params = self.for_client(client_id)
            distinct = json.dumps([name, params], sort_keys=True)
            if distinct not in seen:
                seen.add(distinct)
                build_mechanism(name, params, key_prefix="mechanism")


    def _check_override(self, override: Mapping[str, Any], key: str) -> None:
        """An override sets neither a target nor, under one, another mechanism or the noise
        parameter being calibrated."""
        for own in (TARGET_KEY, _RECORD_KEY):
            if own in override:
                raise InputError(f"{key}.{own}", override[own],
                                 f"unset: one target for the run (mechanism.{TARGET_KEY})")
        if self.target_epsilon is None:
            return
        for name in ("name", self.noise_parameter()):
            if name in override and (name != "name" or override[name] != self.name):
                raise InputError(f"{key}.{name}", override[name], f"unset while "
                                 f"mechanism.{TARGET_KEY} is set (it calibrates "
                                 f"mechanism.{self.noise_parameter()} for every client)")


def _check_calibration(name: str, params: Mapping[str, Any], target: float | None,
                       record: CalibrationRecord | None, prefix: str) -> None:
    """A target needs a mechanism with a noise parameter left unset; a calibration record
    names that parameter and its value in ``params``, and comes without a target."""
    if target is None and record is None:
        return
    key = f"{prefix}{TARGET_KEY}" if target is not None else f"{prefix}{_RECORD_KEY}"
    if name not in accountable():
        raise InputError(key, "a table" if target is None else target,
                         f"unset with mechanism {name!r}: only a mechanism with a noise "
                         f"parameter ({', '.join(accountable())}) is calibrated")
    own = release_class(name).parameter_name
    if target is not None and record is not None:
        raise InputError(f"{prefix}{_RECORD_KEY}", "a table", f"unset with {prefix}{TARGET_KEY} "
                         "(the record of a calibration replaces the target)")
    if target is not None and own in params:
        raise InputError(key, target, f"unset while {prefix}{own} is set: set one of "
                         f"{prefix}{TARGET_KEY} and {prefix}{own} (the target calibrates it)")
    if record is not None and record.parameter != own:
        raise InputError(f"{prefix}{_RECORD_KEY}.parameter", record.parameter,
                         f"{own!r}, the noise parameter of {name}")
    if record is not None and params.get(own) != record.value:
        raise InputError(f"{prefix}{_RECORD_KEY}.value", record.value,
                         f"{prefix}{own} = {params.get(own)!r} (the value calibrated)")


def _mechanism_params(raw: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Each key checked as a parameter some registered mechanism declares, by its checker."""
    params = {}
    for key, value in raw.items():
        declared = parameter_field(key)
        if declared is None:
            known = ["name", "overrides", BUDGET_KEY, TARGET_KEY, _RECORD_KEY, *parameter_names()]
            raise InputError(f"{prefix}{key}", value, f"a known key: one of {known}")
        params[key] = declared.metadata["check"](f"{prefix}{key}", value)
        if isinstance(params[key], tuple):
            params[key] = list(params[key])
    return params


def node_config_keys() -> dict[str, str]:
    """Mechanism keys a SuperNode can set in ``--node-config`` (Flower's dashed style) → the
    ``[mechanism]`` key they override; the ClientApp reads them, ``deploy-local`` writes them."""
    keys = {"mechanism": "name"}
    keys.update({name.replace("_", "-"): name for name in parameter_names()})
    return keys
