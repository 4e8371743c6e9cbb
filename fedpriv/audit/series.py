"""Per-client series over rounds, read from a report object, and their summaries for plots.

Plain NumPy over the ``clients[*].per_round`` entries of :func:`fedpriv.audit.build_report`
(or of ``report.json``, where infinities are the string ``"inf"``). Missing values are NaN;
an optional object-valued field such as ``epsilon_lower`` contributes its ``value``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpriv.jsonio import json_number

__all__ = [
    "Band",
    "Series",
    "band",
    "client_series",
    "field_value",
    "log_scale_helps",
    "status_counts",
    "worst_first",
]

Row = Mapping[str, Any]


def field_value(entry: Row | None, key: str) -> float:
    """``entry[key]`` as a float (``"inf"`` → inf; None, absent or not a number → NaN); an
    object such as ``{"value": 1.2, "confidence": 0.95}`` gives its ``value``."""
    if entry is None:
        return math.nan
    value = entry.get(key)
    if isinstance(value, Mapping):
        value = value.get("value")
    return json_number(value)


@dataclass(frozen=True)
class Series:
    """``values[i, j]``: client ``client_ids[i]`` after round ``rounds[j]`` (NaN: no value)."""

    client_ids: list[int]
    rounds: np.ndarray
    values: np.ndarray

    def unbounded(self) -> list[int]:
        """Clients with an infinite value in some round (not drawable on any axis)."""
        return [
            c for c, row in zip(self.client_ids, self.values, strict=True) if np.isposinf(row).any()
        ]

    def bounded(self) -> Series:
        """The series without the :meth:`unbounded` clients."""
        keep = ~np.isposinf(self.values).any(axis=1)
        ids = [c for c, k in zip(self.client_ids, keep, strict=True) if k]
        return Series(ids, self.rounds, self.values[keep])


def client_series(clients: Sequence[Row], key: str, *, cumulative: bool = False) -> Series:
    """The per-round values of ``key`` for every client, on the union of their rounds.

    With ``cumulative`` a round without a value repeats the client's previous value (a
    cumulative tally does not change in a round the client sat out).
    """
    rounds = np.array(sorted({int(e["round"]) for c in clients for e in c.get("per_round", [])}))
    column = {int(r): j for j, r in enumerate(rounds)}
    values = np.full((len(clients), len(rounds)), np.nan)
    for i, client in enumerate(clients):
        for entry in client.get("per_round", []):
            values[i, column[int(entry["round"])]] = field_value(entry, key)
    if cumulative:
        for row in values:
            for j in range(1, len(row)):
                if math.isnan(row[j]):
                    row[j] = row[j - 1]
    return Series([int(c["client_id"]) for c in clients], rounds, values)


@dataclass(frozen=True)
class Band:
    """Per round, over the clients with a finite value: quartiles, extremes and the client
    whose last finite value is largest (drawn by name)."""

    rounds: np.ndarray
    low: np.ndarray
    q25: np.ndarray
    median: np.ndarray
    q75: np.ndarray
    high: np.ndarray
    counts: np.ndarray
    worst_id: int | None
    worst: np.ndarray


def _last_finite(row: np.ndarray) -> float:
    finite = row[np.isfinite(row)]
    return float(finite[-1]) if finite.size else -math.inf


def band(series: Series) -> Band:
    """Quartiles and extremes per round of a (bounded) series; NaN where no client has a
    finite value. The worst client is the one with the largest last finite value (the
    smallest id among equals)."""
    values = np.where(np.isfinite(series.values), series.values, np.nan)
    counts = np.isfinite(values).sum(axis=0)
    stats = np.full((5, len(series.rounds)), np.nan)
    some = counts > 0
    if some.any():
        stats[:, some] = np.nanpercentile(values[:, some], [0, 25, 50, 75, 100], axis=0)
    finals = [_last_finite(row) for row in values]
    best = int(np.argmax(finals)) if finals and max(finals) > -math.inf else None
    worst = values[best] if best is not None else np.full(len(series.rounds), np.nan)
    worst_id = None if best is None else series.client_ids[best]
    return Band(series.rounds, *stats, counts, worst_id, worst)


def log_scale_helps(values: np.ndarray) -> bool:
    """Whether a log axis helps: every finite value positive and spanning more than 10×."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    return bool(finite.size) and finite.min() > 0 and finite.max() / finite.min() > 10


def _worst_key(client: Row) -> tuple[float, float, float, int]:
    attack = client.get("attack") or {}
    keys = (
        field_value(client, "epsilon"),
        field_value(client, "log_bayes_capacity"),
        field_value(attack, "ssim"),
    )
    return (*(-k if not math.isnan(k) else math.inf for k in keys), int(client["client_id"]))


def worst_first(clients: Sequence[Row]) -> list[Row]:
    """Clients by ε (largest first; infinite first, unmeasured last), then cumulative log
    Bayes capacity, then best attack SSIM, then id."""
    return sorted(clients, key=_worst_key)


def status_counts(
    clients: Sequence[Row], key: str = "verification",
    status_of: Callable[[Row], Any] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The rounds (union of the clients' rounds, ascending) and, per status found in the
    per-round entries' ``key["status"]`` (or given by ``status_of(entry)``), how many entries
    carry it in each round."""
    rounds = sorted({int(e["round"]) for c in clients for e in c.get("per_round", [])})
    column = {r: j for j, r in enumerate(rounds)}
    counts: dict[str, np.ndarray] = {}
    for client in clients:
        for entry in client.get("per_round", []):
            status = (status_of(entry) if status_of is not None
                      else (entry.get(key) or {}).get("status"))
            if status is not None:
                row = counts.setdefault(str(status), np.zeros(len(rounds), dtype=np.int64))
                row[column[int(entry["round"])]] += 1
    return np.array(rounds), counts
