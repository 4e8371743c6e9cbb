"""Deterministic seeds and noise generators for (run seed, client, round, stream).

Each client's noise in each round comes from its own ``torch.Generator``, seeded with a
63-bit integer derived by NumPy's ``SeedSequence`` (a hash designed for exactly this) from the
run seed, the client id, the round and a stable hash of the stream name. Runs are
reproducible from the config's seed; streams ("noise", "batch", "canaries", …) never overlap.
Clients seed their mechanism's noise with it, and client and server both seed the canaries'
designs with it (:func:`fedpriv.canaries.round_design`), so it sits beside mechanisms and
canaries rather than in either. With the labelled simulation oracle the server re-draws a
client's committed noise from the same streams (:mod:`fedpriv.verification.committed`): a
client that says so in its report (:data:`SEEDED_NOISE`) drew its batches and its noise here.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["SEEDED_NOISE", "UPDATE_NOISE_STREAM", "derive_seed", "make_generator",
           "update_generator"]

SEEDED_NOISE = "fedpriv-seeded-cpu"
"""A report's ``noise-stream`` (:class:`fedpriv.protocol.GroundTruthOracle`) saying: my batches
and my noise were drawn on the CPU from :func:`make_generator` ``(run seed, partition id,
round, "noise")`` in :func:`fedpriv.training.local_train`'s order — each step's batch, then
its mechanism's noise — and, client level, the update's noise from :func:`update_generator`."""
UPDATE_NOISE_STREAM = "client-update-noise"
"""The seeding stream of a client-level update's noise (:func:`update_generator`)."""


def derive_seed(seed: int, client_id: int, round: int, stream: str = "noise") -> int:
    """A 63-bit seed determined by the tuple; stable across processes and platforms."""
    if min(seed, client_id, round) < 0:
        raise ValueError(
            f"derive_seed: seed, client_id, round must be >= 0, got {seed, client_id, round}"
        )
    stream_key = int.from_bytes(hashlib.sha256(stream.encode()).digest()[:8], "little")
    words = np.random.SeedSequence([seed, client_id, round, stream_key]).generate_state(
        2, np.uint32
    )
    return (int(words[0]) | (int(words[1]) << 32)) & (2**63 - 1)


def make_generator(
    seed: int,
    client_id: int,
    round: int,
    stream: str = "noise",
    device: str | torch.device = "cpu",
) -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with :func:`derive_seed`."""
    import torch

    generator = torch.Generator(device=device)
    generator.manual_seed(derive_seed(seed, client_id, round, stream))
    return generator


def update_generator(seed: int | None, client_id: int, round: int) -> np.random.Generator:
    """The generator of one client-round's client-level update noise (privacy-math.md §11):
    derived from ``seed`` on :data:`UPDATE_NOISE_STREAM` (reproducible; what the server
    re-draws), or fresh operating-system entropy when ``seed`` is None."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(derive_seed(seed, client_id, round, UPDATE_NOISE_STREAM))
