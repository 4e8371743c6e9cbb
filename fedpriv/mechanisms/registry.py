"""The mechanism registry: every mechanism of this package, by name.

Mechanisms register themselves by subclassing :class:`~fedpriv.mechanisms.base.Mechanism` with a
``name``; this module imports every module of the package once, so a new mechanism is found by
being a file here. Everything that offers a choice of mechanism — the configuration, the
command line, the sweep, the accountant's front end — reads these functions.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from typing import Any

from fedpriv.errors import InputError
from fedpriv.mechanisms.base import REGISTERED, Mechanism, parameter_fields

__all__ = [
    "accountable",
    "build_mechanism",
    "mechanism_class",
    "make_release",
    "mechanism_names",
    "parameter_field",
    "parameter_names",
    "release_class",
]


@cache
def _registry() -> dict[str, type[Mechanism]]:
    package = importlib.import_module("fedpriv.mechanisms")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"fedpriv.mechanisms.{module.name}")
    return dict(sorted(REGISTERED.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))))


# Listing order in choices and tables: from no protection to the noisy mechanisms; others after.
_ORDER = {"none": 0, "clip": 1, "gaussian": 2, "laplace": 3, "vmf": 4, "client-gaussian": 5}


def mechanism_names() -> list[str]:
    """Every registered mechanism name."""
    return list(_registry())


def mechanism_class(name: Any, key: str = "mechanism.name") -> type[Mechanism]:
    """The class registered as ``name``; InputError naming ``key`` otherwise."""
    registry = _registry()
    if not isinstance(name, str) or name not in registry:
        raise InputError(key, name, f"one of {list(registry)}")
    return registry[name]


def build_mechanism(
    name: Any, params: Mapping[str, Any], key_prefix: str = "mechanism"
) -> Mechanism:
    """Build the mechanism ``name`` from its config parameters.

    Raises
    ------
    InputError
        On an unknown name (key ``f"{key_prefix}.name"``) or a bad parameter
        (key ``f"{key_prefix}.<param>"``). Keys the mechanism does not use are ignored.
    """
    return mechanism_class(name, f"{key_prefix}.name").from_params(params, key_prefix)


@cache
def _release_classes() -> dict[str, type]:
    """Mechanism name → its :class:`~fedpriv.accounting.events.Release` subclass, for the
    mechanisms that have a formal guarantee (a noise parameter to account)."""
    from fedpriv.accounting.events import Release

    found: dict[str, type] = {}
    for name in _registry():
        for cls in Release.__subclasses__():
            if cls.__dict__.get("mechanism") == name:
                found[name] = cls
    return found


def accountable() -> list[str]:
    """Names of the mechanisms with a formal guarantee (``fedpriv account`` and the sweep)."""
    return list(_release_classes())


def make_release(name: Any, parameter: float, dim: int | None = None) -> Any:
    """One release of the accountable mechanism ``name`` at ``parameter`` (``dim``: the
    released dimension, needed by the VMF)."""
    return release_class(name, "mechanism").calibration_start(dim).with_parameter(parameter)


def release_class(name: Any, key: str = "--mechanism") -> type:
    """The Release subclass of an accountable mechanism; InputError naming ``key`` otherwise."""
    classes = _release_classes()
    if not isinstance(name, str) or name not in classes:
        raise InputError(key, name, f"one of {list(classes)}")
    return classes[name]


@cache
def _parameters() -> dict[str, dataclasses.Field]:
    fields: dict[str, dataclasses.Field] = {}
    for cls in _registry().values():
        for f in parameter_fields(cls):
            fields.setdefault(f.name, f)
    return fields


def parameter_field(key: str) -> dataclasses.Field | None:
    """The declaration (:func:`~fedpriv.mechanisms.base.param`) of a parameter of any registered
    mechanism, or None if no mechanism takes ``key``."""
    return _parameters().get(key)


def parameter_names() -> list[str]:
    """Every parameter any registered mechanism takes."""
    return list(_parameters())
