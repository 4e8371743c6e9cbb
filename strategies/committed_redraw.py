"""The server's re-draw of a client-round's committed batches and noise (issue 42).

:func:`redraw` re-draws, from the seeded streams fedpriv's client declares (``noise-stream``),
what the client drew, with the client's own sampling function and the mechanism's own noise
draw; :func:`fedpriv.verification.committed.committed_test` then holds the release to it.
It lives beside the replay (:mod:`strategies.sensitivity_replay`) because it draws with the
declared mechanism, which the verification layer does not import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fedpriv.mechanisms import Mechanism
from fedpriv.verification.committed import Redrawn

__all__ = ["redraw"]


def redraw(mechanism: Mechanism, *, seed: int, client_id: int, server_round: int,
           local_size: int, batch_size: float, sampling: str, steps: int,
           shapes: Sequence[tuple[int, ...]], dtype: np.dtype, divisor: float) -> Redrawn:
    """Re-draw a client-round's batches and noise from the seeded streams, in the client's
    order (:mod:`fedpriv.verification.committed`).

    Parameters
    ----------
    mechanism
        The declared mechanism (record level: additive; client level: ``client-gaussian``).
    seed, client_id, server_round
        The run seed, the client's partition id and the round (the streams' keys).
    local_size, batch_size, sampling
        ``n`` (the partition's size as the server knows it), ``L`` and the sampling, as the
        client's :func:`~fedpriv.training.sample_batch` takes them.
    steps
        The declared local steps ``k``.
    shapes, dtype
        The model's parameter shapes (in order) and the dtype the client trained in.
    divisor
        ``L`` each record-level release's sum is divided by (1 at the client level).
    """
    import torch

    from fedpriv.seeding import make_generator, update_generator
    from fedpriv.training.dpsgd import sample_batch

    generator = make_generator(seed, client_id, server_round)  # the CPU stream
    size = int(batch_size) if sampling == "fixed" else batch_size
    like = torch.from_numpy(np.zeros(sum(math.prod(s) for s in shapes), dtype))
    batches, noises = [], []
    for _ in range(steps):
        batches.append(sample_batch(local_size, size, sampling, generator).numpy())
        if mechanism.level == "record":
            noises.append(mechanism.draw_noise(like, generator).numpy().astype(np.float64)
                          / divisor)
    if mechanism.level == "client":
        zeros = [np.zeros(s) for s in shapes]
        update = mechanism.privatize_update(zeros, update_generator(seed, client_id,
                                                                   server_round))
        noises.append(np.concatenate([a.reshape(-1) for a in update]))
    return Redrawn(tuple(batches), tuple(noises))
