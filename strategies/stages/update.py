"""Stage 3, update: each reply's update ``Δ = θ_client − θ`` (float32, as stored and attacked)
and, for a declared reply, Δ flattened once for the canaries, the replay sketches and the
fresh-noise test."""

from __future__ import annotations

import numpy as np

from strategies.stages.base import Reply, Round, live

__all__ = ["update"]


def update(batch: list[Reply], rnd: Round) -> None:
    for reply in live(batch):
        reply.delta = [(a - b).astype(np.float32)
                       for a, b in zip(reply.accepted.arrays, rnd.broadcast, strict=True)]
        if reply.report is not None:
            reply.flat = np.concatenate([d.ravel() for d in reply.delta])
