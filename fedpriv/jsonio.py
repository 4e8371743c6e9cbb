"""Strict JSON for reports: non-finite floats become the strings "inf", "-inf", "nan"."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["dumps", "json_number", "jsonable", "optional_loads", "write_json"]


def jsonable(obj: Any) -> Any:
    """A copy of ``obj`` in which every non-finite float is a string (JSON has no inf/nan)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj


def json_number(value: Any) -> float:
    """The inverse of :func:`jsonable` for one number: a real number, or one of the strings
    ``"inf"``, ``"-inf"``, ``"nan"``, as a float; NaN for anything else (None, text)."""
    if isinstance(value, str):
        return float(value) if value in ("inf", "-inf", "nan") else math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def dumps(obj: Any, indent: int | None = None) -> str:
    """Serialise ``obj`` as strict JSON."""
    return json.dumps(jsonable(obj), allow_nan=False, indent=indent)


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` as indented strict JSON, atomically (temp file + rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(dumps(obj, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def optional_loads(text: str | None) -> Any:
    """``json.loads(text)``, None for None: a nullable JSON column of the audit store."""
    return None if text is None else json.loads(text)
