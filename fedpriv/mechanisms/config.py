"""``[mechanism]``: each client's mechanism by name and parameters, and its ε budget.

The table is checked by the mechanisms' own declarations (:mod:`fedpriv.mechanisms.registry`):
no parameter name is written here.
"""

from __future__ import annotations

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
from fedpriv.schema import Entry, default_text, type_name, type_ok
from fedpriv.validate import check_positive

__all__ = ["BUDGET_KEY", "MechanismConfig", "node_config_keys"]

BUDGET_KEY = "epsilon_budget"
"""The ``[mechanism]`` key (and override key) of a client's ε budget."""


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
        return entries

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


def node_config_keys() -> dict[str, str]:
    """Mechanism keys a SuperNode can set in ``--node-config`` (Flower's dashed style) → the
    ``[mechanism]`` key they override; the ClientApp reads them, ``deploy-local`` writes them."""
    keys = {"mechanism": "name"}
    keys.update({name.replace("_", "-"): name for name in parameter_names()})
    return keys
