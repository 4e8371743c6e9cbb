"""Lazy package exports (PEP 562): a package re-exports its public names without importing the
modules that define them until one is used, so importing a light submodule (a package's
``config`` section) does not import torch.

Written here rather than taken from ``lazy_loader`` (Scientific Python SPEC 1): its one-list form
reads the names from an ``__init__.pyi`` stub, which Flower leaves out of the app bundle that
``flwr run`` ships (only ``.py``, ``.toml``, ``.md``, ... are packed), and its other form keeps
the names where neither ruff nor a type checker can see them."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


class _Package(types.ModuleType):
    """A package with lazy exports. An export named as one of its submodules (``calibrate`` in
    :mod:`fedpriv.accounting`) stays the export: the import system's binding of the submodule
    to the package's attribute, which would hide :func:`lazy_exports`' ``__getattr__`` from
    then on, is not kept — as an eager ``from .calibrate import calibrate`` in the package's
    ``__init__`` would have rebound it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_exports", ()):
            return
        super().__setattr__(name, value)


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a submodule
    name) on first access of ``name`` and returns that module's ``name``. Call it in the
    package's ``__init__``: the package keeps its exports over submodules of the same name
    (:class:`_Package`)."""
    module = sys.modules.get(package)
    if module is not None and type(module) is types.ModuleType:
        module.__class__ = _Package
        module._exports = frozenset(exports)

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
