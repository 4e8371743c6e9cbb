"""Seeds and noise generators for (seed, client, round, stream), and whose seed a client's
noise comes from.

Each client's noise in each round comes from its own ``torch.Generator``, seeded with a
63-bit integer derived by NumPy's ``SeedSequence`` (a hash designed for exactly this) from a
seed, the client id, the round and a stable hash of the stream name; streams ("noise",
"batch", "canaries", …) never overlap. Client and server both seed the canaries' designs with
the run's seed (:func:`fedpriv.canaries.round_design`), so it sits beside mechanisms and
canaries rather than in either.

A client's batches and noise are its secret (docs/trust.md §4): the run's seed is sent by the
server, and noise derived from it is noise the server can re-draw and subtract. So a client
draws them from operating-system entropy (a seed of None here) unless its own side opts in to
the run seed's stream (:func:`client_noise_seed`): the node config's
:data:`REPRODUCIBLE_NOISE_KEY`, or, where fedpriv's simulator runs the clients, the environment's
:data:`REPRODUCIBLE_NOISE_ENV`, which that simulator sets so that its runs are reproducible.
With the labelled simulation oracle the server re-draws a client's committed noise from the
run seed's streams (:mod:`fedpriv.verification.committed`): a client that says so in its report
(:data:`SEEDED_NOISE`) drew its batches and its noise there.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["REPRODUCIBLE_NOISE_ENV", "REPRODUCIBLE_NOISE_KEY", "SEEDED_NOISE",
           "UPDATE_NOISE_STREAM", "client_noise_seed", "derive_seed", "make_generator",
           "update_generator"]

SEEDED_NOISE = "fedpriv-seeded-cpu"
"""A report's ``noise-stream`` (:class:`fedpriv.protocol.GroundTruthOracle`) saying: my batches
and my noise were drawn on the CPU from :func:`make_generator` ``(run seed, partition id,
round, "noise")`` in :func:`fedpriv.training.local_train`'s order — each step's batch, then
its mechanism's noise — and, client level, the update's noise from :func:`update_generator`."""
UPDATE_NOISE_STREAM = "client-update-noise"
"""The seeding stream of a client-level update's noise (:func:`update_generator`)."""
REPRODUCIBLE_NOISE_KEY = "fedpriv-reproducible-noise"
"""The node-config key (``--node-config 'fedpriv-reproducible-noise=true'``) by which a node opts
in to drawing its batches and noise from the run seed's stream, which the server can re-draw."""
REPRODUCIBLE_NOISE_ENV = "FEDPRIV_REPRODUCIBLE_NOISE"
"""The environment variable (``1`` or ``0``) by which the processes that run clients opt in (or
not) where no node config can be set: ``fedpriv simulate`` sets it to ``1`` for its Ray
workers, and ``flwr run`` with a local SuperLink passes on what its caller exported."""


log = logging.getLogger(__name__)


@cache
def _opted_in(source: str) -> None:
    """Say once per process and source that this process's clients draw the noise a server
    can re-draw: an opt-in made by an exported variable is otherwise silent."""
    log.warning("%s: this process's clients draw their batches and DP noise from the run "
                "seed's stream, which the server knows (reproducible runs; a deployment's "
                "clients should not)", source)


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


def client_noise_seed(
    run_seed: int, node_config: Mapping[str, Any], environ: Mapping[str, str] = os.environ
) -> int | None:
    """The seed a client draws its batches and noise from: ``run_seed`` when its side opts in
    (:data:`REPRODUCIBLE_NOISE_KEY` in ``node_config``, which wins, else
    :data:`REPRODUCIBLE_NOISE_ENV` in ``environ``, an empty value as unset), else None, its
    secret (fresh entropy). An opt-in is logged as a warning, once per process and source.

    Raises ValueError, naming the key, for a value that is not a boolean (node config) or
    ``0``/``1`` (environment)."""
    if REPRODUCIBLE_NOISE_KEY in node_config:
        value = node_config[REPRODUCIBLE_NOISE_KEY]
        if not isinstance(value, bool):
            raise ValueError(f"node config {REPRODUCIBLE_NOISE_KEY}: expected true or false, "
                             f"got {value!r}")
        if value:
            _opted_in(f"node config {REPRODUCIBLE_NOISE_KEY} = true")
        return run_seed if value else None
    value = environ.get(REPRODUCIBLE_NOISE_ENV) or "0"  # exported empty: unset
    if value not in ("0", "1"):
        raise ValueError(f"environment variable {REPRODUCIBLE_NOISE_ENV}: expected 0 or 1, "
                         f"got {value!r}")
    if value == "1":
        _opted_in(f"environment {REPRODUCIBLE_NOISE_ENV}=1")
    return run_seed if value == "1" else None


def make_generator(
    seed: int | None,
    client_id: int,
    round: int,
    stream: str = "noise",
    device: str | torch.device = "cpu",
) -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with :func:`derive_seed`, or with fresh
    operating-system entropy when ``seed`` is None."""
    import torch

    generator = torch.Generator(device=device)
    if seed is None:
        generator.manual_seed(secrets.randbits(63))
    else:
        generator.manual_seed(derive_seed(seed, client_id, round, stream))
    return generator


def update_generator(seed: int | None, client_id: int, round: int) -> np.random.Generator:
    """The generator of one client-round's client-level update noise (privacy-math.md §11):
    derived from ``seed`` on :data:`UPDATE_NOISE_STREAM` (reproducible; what the server
    re-draws), or fresh operating-system entropy when ``seed`` is None."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(derive_seed(seed, client_id, round, UPDATE_NOISE_STREAM))
