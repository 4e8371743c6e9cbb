"""Split a training set across clients: IID or Dirichlet label skew, deterministic by seed.

Dirichlet label skew follows Hsu, Qi & Brown, "Measuring the effects of non-identical data
distribution for federated visual classification" (arXiv 1909.06335): for every class, client
shares are drawn from Dir(α·1); small α gives clients few classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fedpriv.errors import InputError

__all__ = ["client_partitions", "client_sizes", "dirichlet_partition", "iid_partition",
           "partition_indices"]


def iid_partition(n: int, num_clients: int, seed: int) -> list[np.ndarray]:
    """Shuffle ``range(n)`` and cut it into ``num_clients`` near-equal sorted parts."""
    perm = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(perm, num_clients)]


def dirichlet_partition(
    labels: npt.ArrayLike, num_clients: int, alpha: float, seed: int, min_size: int = 1
) -> list[np.ndarray]:
    """Label-skewed split: per class, proportions ~ Dir(α); redrawn until every client holds at
    least ``min_size`` records (at most 100 tries)."""
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    for _ in range(100):
        parts: list[list[int]] = [[] for _ in range(num_clients)]
        for cls in np.unique(y):
            idx = rng.permutation(np.flatnonzero(y == cls))
            shares = rng.dirichlet(np.full(num_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(idx)).astype(int)
            for client, chunk in enumerate(np.split(idx, cuts)):
                parts[client].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise InputError(
        "data.dirichlet_alpha", alpha, f"a larger value: no split gave every one of "
        f"{num_clients} clients {min_size} record(s)"
    )


def partition_indices(
    labels: npt.ArrayLike, num_clients: int, scheme: str, alpha: float, seed: int
) -> list[np.ndarray]:
    """Indices of each client's records under ``scheme`` (``"iid"`` or ``"dirichlet"``)."""
    n = len(np.asarray(labels))
    if num_clients > n:
        raise InputError("data.num_clients", num_clients, f"at most the {n} training records")
    if scheme == "iid":
        return iid_partition(n, num_clients, seed)
    if scheme == "dirichlet":
        return dirichlet_partition(labels, num_clients, alpha, seed)
    raise InputError("data.partition", scheme, "one of ['dirichlet', 'iid']")


def client_partitions(data: Any, labels: npt.ArrayLike, seed: int) -> list[np.ndarray]:
    """Every client's record indices under the run's ``[data]`` (a ``DataConfig``): what the
    ClientApp's partition gives it (``clients/local_data.py``: the same function on the same
    labels and seed), and what the server's oracle replay reads."""
    return partition_indices(labels, data.num_clients, data.partition, data.dirichlet_alpha,
                             seed)


def client_sizes(data: Any, labels: npt.ArrayLike, seed: int) -> list[int]:
    """Every client's local size (:func:`client_partitions`): what the server, the
    calibration and the sweep count on."""
    return [len(p) for p in client_partitions(data, labels, seed)]
