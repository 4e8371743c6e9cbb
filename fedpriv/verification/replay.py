"""Replayed updates: a client that sends an earlier round's update again.

A replay passes every test of the update against its declared noise — it *is* a genuine noisy
release, just not a fresh one — yet it adds no new information and breaks the accounting (the
same noise, counted twice). Fresh releases almost surely differ: two independent draws of
``p`` coordinates coincide to float32 rounding with probability zero. So the server keeps, per
client, a short sketch of every accepted update and calls a new update a replay when its sketch
matches an earlier one to a relative ``1e-3`` (float32 round trips of θ + Δ move it by ~1e-7).

The sketch is a count sketch (Charikar, Chen & Farach-Colton 2002): ``s_j = Σ_{h(i) = j}
ξ_i Δ_i`` with a fixed random bucket ``h(i)`` and sign ``ξ_i`` — O(p) time and memory for any
model size, and a linear map, so equal updates have equal sketches.
"""

from __future__ import annotations

import numpy as np

__all__ = ["UpdateSketches"]

_WIDTH = 64
_TOLERANCE = 1e-3


class UpdateSketches:
    """Sketches of each client's accepted updates, to recognise a replay.

    Parameters
    ----------
    dim
        The update's length ``p``.
    seed
        Seed of the sketch's buckets and signs (the run's seed: a resumed run rebuilds them).
    """

    def __init__(self, dim: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 0x5E7C])
        self._bucket = rng.integers(0, _WIDTH, size=dim)
        self._sign = rng.choice(np.array([-1.0, 1.0]), size=dim)
        self._seen: dict[int, list[tuple[int, np.ndarray]]] = {}
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # (update, its sketch)

    def sketch(self, update: np.ndarray) -> np.ndarray:
        """The count sketch of a flat update (float64)."""
        return np.bincount(self._bucket, weights=self._sign * update.astype(np.float64),
                           minlength=_WIDTH)

    def replay_of(self, client_id: int, update: np.ndarray) -> int | None:
        """The round whose update this one repeats, or None (then nothing is recorded)."""
        new = self.sketch(update)
        self._last = (update, new)  # add() of the same array reuses it (a sketch is a pass)
        for rnd, old in self._seen.get(client_id, []):
            scale = float(np.linalg.norm(old))
            if scale > 0 and float(np.linalg.norm(new - old)) <= _TOLERANCE * scale:
                return rnd
        return None

    def add(self, rnd: int, client_id: int, update: np.ndarray) -> None:
        """Remember an accepted update."""
        last = self._last
        sketch = last[1] if last is not None and last[0] is update else self.sketch(update)
        self._last = None
        self._seen.setdefault(client_id, []).append((rnd, sketch))
