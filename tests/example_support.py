"""The example apps under examples/, imported as Flower would load them (their folder on the
path), and forgotten afterwards so that each test imports them afresh."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).parents[1] / "examples"


def example_modules(monkeypatch, folder: str, package: str) -> Iterator[tuple[ModuleType, ...]]:  # noqa: ANN001
    """Yield ``(server_app, client_app)`` of ``examples/<folder>/<package>``; a fixture's body."""
    monkeypatch.syspath_prepend(str(EXAMPLES / folder))
    yield tuple(importlib.import_module(f"{package}.{name}")
                for name in ("server_app", "client_app"))
    for name in [m for m in sys.modules if m.startswith(package)]:
        del sys.modules[name]
