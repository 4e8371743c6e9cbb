"""Deterministic seeds and noise generators for (run seed, client, round, stream).

Each client's noise in each round comes from its own ``torch.Generator``, seeded with a
63-bit integer derived by NumPy's ``SeedSequence`` (a hash designed for exactly this) from the
run seed, the client id, the round and a stable hash of the stream name. Runs are
reproducible from the config's seed; streams ("noise", "batch", "canaries", …) never overlap.
Clients seed their mechanism's noise with it, and client and server both seed the canaries'
designs with it (:func:`fedpriv.canaries.round_design`), so it sits beside mechanisms and
canaries rather than in either.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["derive_seed", "make_generator"]


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
