"""What an attacker guesses without the update: prior baselines a reconstruction is set against.

A reconstruction's SSIM says nothing about leakage until compared with what the attacker
could produce from public knowledge alone (privacy-math.md §7, "prior baselines"). The
public knowledge here is the server's own held-out evaluation set (``Dataset.test_x/test_y``:
the split the server evaluates the global model on), never a client's training records. For
a batch of ``m`` true images three guesses are scored, each image by image:

``mean``
    The public mean image, guessed for every true image.
``class_mean``
    The public mean image of each label the attack recovered (``AttackResult.labels``; the
    analytic label recovery of :mod:`attacks.labels`), assigned to the true images by the same
    minimum-MSE matching as the reconstructions (:func:`attacks.scoring.match_reconstructions`);
    a true image left without a guess, or a label absent from the public set, gets the mean.
``pool_oracle``
    The public image closest (minimum MSE) to each true image. It is chosen *with* the true
    image, so it is an oracle: an upper bound on what any guess drawn from the public pool can
    score, not something an attacker can do. Kept for reading, never the reference.

The reference prior (``baseline``) is the stronger of ``mean`` and ``class_mean`` by mean
SSIM; gains are the reconstruction's scores minus the reference's. Written here because no
library scores prior guesses for gradient inversion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.scoring import match_reconstructions, paired_ssim

__all__ = ["BASELINES", "PriorBaseline", "PublicPrior", "prior_baseline"]

#: Baselines an attacker can compute; the reference is the best of these by mean SSIM.
ATTAINABLE = ("mean", "class_mean")
#: Every baseline kept in the details, in this order.
BASELINES = (*ATTAINABLE, "pool_oracle")
#: What the public data is, as the report says it.
PUBLIC_SOURCE = "the server's held-out evaluation set (test split)"
#: Bytes of the (true images × public pool) costs :meth:`PublicPrior.nearest` holds at once.
_ROW_BYTES = 2**25


@dataclass(frozen=True, eq=False)
class PublicPrior:
    """The public images (``(N, C, H, W)``, same data range as the scored images) and labels
    an attacker may use, and where they come from."""

    images: np.ndarray
    labels: np.ndarray
    source: str = PUBLIC_SOURCE

    def __post_init__(self) -> None:
        if len(self.images) == 0 or len(self.images) != len(self.labels):
            raise ValueError(
                f"public prior needs N >= 1 images with N labels, got {len(self.images)} "
                f"images and {len(self.labels)} labels"
            )

    @property
    def mean(self) -> np.ndarray:
        """The public mean image ``(C, H, W)``."""
        return np.asarray(self.images, dtype=np.float64).mean(axis=0)

    def class_mean(self, label: int) -> np.ndarray:
        """The public mean image of ``label``; the public mean if the label is absent."""
        rows = np.asarray(self.labels) == label
        if not rows.any():
            return self.mean
        return np.asarray(self.images, dtype=np.float64)[rows].mean(axis=0)

    def nearest(self, truth: np.ndarray) -> np.ndarray:
        """For each true image the public image of minimum MSE (the oracle's pick)."""
        pool = np.asarray(self.images, dtype=np.float64).reshape(len(self.images), -1)
        flat = np.asarray(truth, dtype=np.float64).reshape(len(truth), -1)
        # ‖t − p‖² = ‖t‖² − 2 t·p + ‖p‖²; ‖t‖² is constant per row. In row blocks of
        # _ROW_BYTES: a round's every record (60,000) against the test set (10,000) would be a
        # 4.8 GB matrix at once
        squares = (pool**2).sum(1)[None, :]
        block = max(1, _ROW_BYTES // (8 * max(1, len(pool))))
        picks = np.concatenate([(squares - 2.0 * flat[i:i + block] @ pool.T).argmin(axis=1)
                                for i in range(0, len(flat), block)] or [np.zeros(0, int)])
        return np.asarray(self.images, dtype=np.float64)[picks]


@dataclass(frozen=True, eq=False)
class PriorBaseline:
    """Each baseline's guess for every true image (truth order) and the reference's name."""

    guesses: dict[str, np.ndarray]
    baseline: str

    @property
    def images(self) -> np.ndarray:
        """The reference baseline's guess for every true image, ``(m, C, H, W)``."""
        return self.guesses[self.baseline]


def prior_baseline(
    truth: np.ndarray,
    recovered_labels: np.ndarray | None,
    public: PublicPrior,
) -> PriorBaseline:
    """The baselines' guesses for the true batch ``truth`` (module docstring).

    Parameters
    ----------
    truth
        ``(m, C, H, W)`` true images.
    recovered_labels
        Labels the attack recovered (any length); None gives ``class_mean`` = ``mean``.
    public
        The public images and labels.
    """

    m = len(truth)
    mean = np.broadcast_to(public.mean, (m, *public.mean.shape)).copy()
    by_label = mean.copy()
    if recovered_labels is not None and len(recovered_labels) and m:
        guesses = np.stack([public.class_mean(int(y)) for y in recovered_labels])
        order = match_reconstructions(guesses, truth)
        hit = order >= 0
        by_label[hit] = guesses[order[hit]]
    guesses = {"mean": mean, "class_mean": by_label,
               "pool_oracle": public.nearest(truth) if m else mean}
    scores = {name: float(np.mean(paired_ssim(guesses[name], truth))) if m else 0.0
              for name in ATTAINABLE}
    best = max(ATTAINABLE, key=lambda name: (scores[name], name == "mean"))
    return PriorBaseline(guesses, best)
