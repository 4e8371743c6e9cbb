"""Lazy package exports (PEP 562): a package re-exports its public names without importing the
modules that define them until one is used, so importing a light submodule (a package's
``config`` section) does not import torch.

Written here rather than taken from ``lazy_loader`` (Scientific Python SPEC 1): its one-list form
reads the names from an ``__init__.pyi`` stub, which Flower leaves out of the app bundle that
``flwr run`` ships (only ``.py``, ``.toml``, ``.md``, ... are packed), and its other form keeps
the names where neither ruff nor a type checker can see them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a submodule
    name) on first access of ``name`` and returns that module's ``name``."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
