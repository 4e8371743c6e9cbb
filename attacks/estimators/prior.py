"""The priors a reconstruction is set against: what the attacker has without the update's
pixels.

A reconstruction's SSIM says nothing about leakage until compared with what the attacker
could produce from public knowledge alone (privacy-math.md §7, "prior baselines"). The
public knowledge here is the server's own held-out evaluation set (``Dataset.test_x/test_y``:
the split the server evaluates the global model on), never a client's training records. For
a batch of ``m`` true images three guesses are scored, each image by image:

``no_update`` — the *no-update prior*
    The public mean image, guessed for every true image: what an attacker has before any
    update. The gain over it is the update's total leakage.
``label`` — the *label prior*
    The public mean image of each label the attack recovered from the update
    (``AttackResult.labels``; the analytic label recovery of :mod:`attacks.labels`), assigned
    to the true images by the same minimum-MSE matching as the reconstructions
    (:func:`attacks.scoring.match_reconstructions`); a true image left without a guess, or a
    label absent from the public set, gets the public mean. It uses the update (the labels it
    gives away), so the gain over it is the leakage *beyond the labels*.
``pool_oracle``
    The public image closest (minimum MSE) to each true image. It is chosen *with* the true
    image, so it is an oracle: an upper bound on what any guess drawn from the public pool can
    score, not something an attacker can do. Kept for reading, never the reference.

Beside the priors, :func:`within_class_identification` hides each true image among ``M − 1``
public look-alikes of its class and counts how often the attacker's image names it
(privacy-math.md §13): leakage the labels cannot explain, in the units of the Bayes capacity.

The reference prior (``baseline``, report.json's ``attack.prior``) is the label prior; the
no-update prior is reported beside it (``attack.no_update_prior``). Stores written before these
names call them ``mean`` and ``class_mean`` (:data:`OLD_NAMES`). Written here because no library
scores prior guesses for gradient inversion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attacks.scoring import identification_hits, match_reconstructions
from fedpriv.audit.schema import LABEL_PRIOR, NO_UPDATE_PRIOR, OLD_PRIOR_NAMES

__all__ = ["ATTAINABLE", "BASELINES", "IDENTIFICATION_CANDIDATES", "LABEL", "NO_UPDATE",
           "OLD_NAMES", "Identification", "PriorBaseline", "PublicPrior", "prior_baseline",
           "within_class_identification"]

#: The no-update prior (the public mean image) and the label prior (the public class means of
#: the recovered labels), as the audit store names them.
NO_UPDATE, LABEL = NO_UPDATE_PRIOR, LABEL_PRIOR
#: Baselines an attacker can compute; the reference is the label prior.
ATTAINABLE = (NO_UPDATE, LABEL)
#: Every baseline kept in the details, in this order.
BASELINES = (*ATTAINABLE, "pool_oracle")
#: The names stores written before the two priors were named for what they are used.
OLD_NAMES = OLD_PRIOR_NAMES
#: Candidates ``M`` of the identification score: the true image and ``M − 1`` look-alikes.
IDENTIFICATION_CANDIDATES = 50
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
        return np.asarray(self.images[rows], dtype=np.float64).mean(axis=0)

    def look_alikes(self, label: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` public images of ``label`` drawn without replacement (the whole public set
        where the label is absent), ``(count, C, H, W)``; fewer where too few exist."""
        rows = np.flatnonzero(np.asarray(self.labels) == label)
        if rows.size == 0:
            rows = np.arange(len(self.labels))
        picks = rng.choice(rows, size=min(count, rows.size), replace=False)
        return np.asarray(self.images[np.sort(picks)], dtype=np.float64)  # the rows, not the pool

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
        Labels the attack recovered (any length); None gives the label prior = the no-update
        prior.
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
    guesses = {NO_UPDATE: mean, LABEL: by_label,
               "pool_oracle": public.nearest(truth) if m else mean}
    return PriorBaseline(guesses, LABEL)


@dataclass(frozen=True)
class Identification:
    """``successes`` of ``trials`` true images named among ``candidates`` (``M``) each."""

    successes: int
    trials: int
    candidates: int

    def leakage(self, log_capacity: float = math.inf, confidence: float = 0.95):
        """``log(M·P̂)`` with its Clopper–Pearson interval beside ``min(log C, log M)``
        (:func:`fedpriv.leakage.game.identification_leakage`)."""
        from fedpriv.leakage.game import identification_leakage

        return identification_leakage(self.successes, self.trials, self.candidates,
                                      log_capacity, confidence)

    def summary(self) -> dict[str, int | float | str]:
        """What an attack row stores (the report sets it beside the client-round's log C)."""
        return {"successes": self.successes, "trials": self.trials,
                "candidates": self.candidates, "rate": self.successes / self.trials,
                "chance": 1.0 / self.candidates, "look_alikes": "public images of the true "
                "image's class", "pick": "the candidate nearest (MSE) any of the attacker's "
                "images"}


def within_class_identification(
    guesses: np.ndarray, truth: np.ndarray, classes: np.ndarray, public: PublicPrior, *,
    candidates: int = IDENTIFICATION_CANDIDATES, seed: int = 0,
) -> Identification | None:
    """Each true image among ``M − 1`` public look-alikes of its class; how often the attacker's
    images name it (:func:`attacks.scoring.identification_hits`: the candidate nearest any of
    them). Chance is ``1/M``.

    Parameters
    ----------
    guesses
        ``(n, C, H, W)`` in [0, 1]: the attacker's images (its reconstructions, in any order;
        for a prior, its guesses).
    truth
        ``(m, C, H, W)`` in [0, 1]: the true images.
    classes
        ``(m,)``: the class whose look-alikes hide each true image (−1: the whole public set).
        Fix it before the release (the true class): a candidate set that depends on the
        release is no identification game, and the capacity bound does not hold for it.
    candidates
        ``M``; fewer where the public set holds fewer look-alikes of some class (one ``M`` for
        the whole batch, so every trial has the same chance).
    seed
        Seeds the draw of look-alikes (the same seed draws the same look-alikes).

    Returns None for an empty batch, no guesses, or where no class has a look-alike.
    """
    if len(truth) == 0 or len(guesses) == 0:
        return None
    rng = np.random.default_rng([seed, 39])
    drawn = [public.look_alikes(int(c), candidates - 1, rng) for c in classes]
    m = 1 + min(len(d) for d in drawn)
    if m < 2:
        return None
    hits = identification_hits(guesses, truth, np.stack([d[:m - 1] for d in drawn]))
    return Identification(int(hits.sum()), len(truth), m)
