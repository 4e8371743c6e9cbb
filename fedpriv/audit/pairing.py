"""Which stored true image each stored reconstruction was scored against.

The scorer (``attacks.scoring``, privacy-math.md §7) matches reconstructions to the attacked
batch by a minimum-cost assignment on pairwise MSE and the auditor stores them aligned to that
batch, in the order the client sampled it. The stored ground truth of a client's round is
another list: every record the client used in the round (all local steps), sorted by record
id. So at batch size > 1 (or more than one local step) the two stored lists are not in the
same order, and drawing them column by column pairs wrong images.

:func:`pair_attack` recovers the scorer's pairing from the stored arrays alone and checks it
against the stored batch MSE: first the stored order itself, then the same minimum-cost
assignment (``scipy.optimize.linear_sum_assignment``) against the whole stored ground truth.
A pairing counts as recovered only when its mean MSE reproduces the scorer's to a relative
1e-6; otherwise the images are returned unpaired, and say so. A true image the attack
returned no reconstruction for is stored with the prior baseline's guess in its column and
scored as that guess (``attacks.estimators.prior``), so it counts in the stored MSE like any other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_MATCH_PAIRS", "NO_TRUTH", "PAIRED_AS_STORED", "REMATCHED", "UNPAIRED",
           "Pairing", "pair_attack"]

#: The stored order reproduces the scorer's MSE.
PAIRED_AS_STORED = "as stored"
#: The minimum-MSE assignment against the stored ground truth reproduces the scorer's MSE.
REMATCHED = "re-matched"
#: Neither does (or no MSE was stored): columns are not known to correspond.
UNPAIRED = "unpaired"
#: No true batch is stored (the oracle off, a stock client's update): the reconstructions
#: alone, nothing to pair them with.
NO_TRUTH = "no ground truth"
_RTOL = 1e-6
#: Most (reconstruction, true image) pairs a minimum-MSE matching may cost, here and in the
#: scorer: its cost matrix is 8 bytes a pair (512 MiB). A round's update attacked after many
#: local steps is scored against every record the round used (1,407 steps of batch 128 on
#: Fashion-MNIST: 56,976 records).
MAX_MATCH_PAIRS = 2**26


@dataclass(frozen=True)
class Pairing:
    """True images and reconstructions, column ``j`` of one against column ``j`` of the other
    when :attr:`paired` (no true images at all under :data:`NO_TRUTH`)."""

    originals: np.ndarray
    reconstructions: np.ndarray
    status: str
    note: str

    @property
    def paired(self) -> bool:
        """Whether column ``j`` of the originals is the image reconstruction ``j`` was scored
        against."""
        return self.status in (PAIRED_AS_STORED, REMATCHED)


def _flat(images: np.ndarray) -> np.ndarray:
    """Images in [0, 1] as rows of float64 pixels (the scorer clips to [0, 1] first)."""
    return np.clip(np.asarray(images, dtype=np.float64), 0.0, 1.0).reshape(len(images), -1)


def _reproduces(mean_mse: float, stored_mse: float) -> bool:
    return math.isclose(mean_mse, stored_mse, rel_tol=_RTOL, abs_tol=1e-12)


def pair_attack(
    originals: np.ndarray, reconstructions: np.ndarray, stored_mse: float | None
) -> Pairing:
    """Pair a stored reconstruction batch with the stored ground truth (module docstring).

    Parameters
    ----------
    originals
        The stored true images of the client's round, ``(N, ...)`` in [0, 1].
    reconstructions
        The stored reconstructions, ``(m, ...)`` with the same per-image shape.
    stored_mse
        The attack's stored batch MSE (mean over matched images, pixels in [0, 1]); None or
        NaN when not measured.

    Returns
    -------
    Pairing
        Originals reordered to match the reconstructions when the pairing is recovered.
    """
    truth, recon = _flat(originals), _flat(reconstructions)
    if truth.shape[1] != recon.shape[1]:
        raise ValueError(
            f"true images of {truth.shape[1]} pixels vs reconstructions of {recon.shape[1]}"
        )
    if stored_mse is None or not math.isfinite(stored_mse):
        return Pairing(originals, reconstructions, UNPAIRED, "no stored MSE to check a pairing")
    if len(truth) == len(recon) and _reproduces(float(((truth - recon) ** 2).mean()), stored_mse):
        return Pairing(
            originals, reconstructions, PAIRED_AS_STORED, "stored order reproduces the scored MSE"
        )
    if len(recon) * len(truth) > MAX_MATCH_PAIRS:
        return Pairing(originals, reconstructions, UNPAIRED, f"the stored order does not "
                       f"reproduce the scored MSE and {len(recon)} x {len(truth)} images are "
                       f"over {MAX_MATCH_PAIRS:,} pairs to re-match")
    from scipy.optimize import linear_sum_assignment

    # ‖r − t‖² = ‖r‖² + ‖t‖² − 2 r·t: an (m, N) matrix instead of (m, N, pixels)
    cost = (recon**2).sum(1)[:, None] + (truth**2).sum(1)[None, :] - 2.0 * recon @ truth.T
    rows, cols = linear_sum_assignment(cost)
    matched = ((recon[rows] - truth[cols]) ** 2).mean(axis=1)
    if _reproduces(float(matched.mean()), stored_mse):
        note = (
            f"re-matched to {len(truth)} stored true images by minimum MSE; "
            "reproduces the scored MSE"
        )
        return Pairing(originals[cols], reconstructions[rows], REMATCHED, note)
    note = (
        f"neither the stored order nor a minimum-MSE match reproduces the scored MSE "
        f"{stored_mse:.4g}: columns are not paired"
    )
    return Pairing(originals, reconstructions, UNPAIRED, note)
