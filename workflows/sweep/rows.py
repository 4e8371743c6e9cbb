"""The sweep's result rows as the figures, the grid and the study read them.

A row is one cell of ``results.csv`` (:mod:`workflows.sweep.results`) as a mapping; values read
back from JSON may be None or the strings ``"inf"``/``"nan"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Row", "number", "series"]

Row = Mapping[str, Any]


def number(value: Any) -> float:
    """A row value as a float: None → NaN; the JSON strings "inf"/"nan" → inf/NaN."""
    return math.nan if value is None else float(value)


def series(rows: Sequence[Row]) -> list[tuple[str, int]]:
    """``(mechanism, batch size)`` of every line of cells with a guarantee, in row order."""
    return list(dict.fromkeys((r["mechanism"], r["batch_size"]) for r in rows
                              if r.get("parameter_name") is not None))
