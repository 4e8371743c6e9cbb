"""Scores of a reconstruction against the ground truth (privacy-math.md §7).

All scores are computed in [0, 1] pixel space (images in another data range are rescaled
first) with scikit-image: ``mean_squared_error``, ``peak_signal_noise_ratio`` and
``structural_similarity`` (the plain Wang et al. 2004 SSIM: 7×7 uniform window, ``data_range=1``,
averaged over channels — *not* the wavelet SSIM some attack frameworks call "SSIM").
Reconstructions come in unknown order, so they are first matched to the true images by a
minimum-cost assignment on pairwise MSE (``scipy.optimize.linear_sum_assignment``).

Every true image counts in every mean: one the attack returned no reconstruction for is scored
as the label prior's guess for it (:mod:`attacks.estimators.prior`), so returning fewer
images than the batch gains nothing on those images instead of vanishing from the mean.

Two more scores look past the whole-image SSIM:

* **Support SSIM** (:func:`support_ssim`): the SSIM map averaged over the digit's support only
  (:func:`support_mask`: the pixels where the true image differs from its background), so an
  empty background that any guess matches cannot inflate it. (On 16×16 digits it is within
  0.01 of the plain SSIM, whose cropped border already leaves the background out:
  docs/leakage.md.)
* **Identification** (:func:`identification_hits`): each true image hidden among public
  look-alikes of its class; the attacker names the candidate nearest (MSE) to any of its
  reconstructions (no matching to the truth).
  The rate against chance ``1/M`` is read as ``log(M·P̂)`` with a Clopper–Pearson interval
  beside the Bayes-capacity bound (privacy-math.md §13, :mod:`fedpriv.leakage.game`).

This is the only place, with the estimators (:mod:`attacks.estimators.bayesian`,
:mod:`attacks.estimators.prior`), that sees ground truth.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from skimage import metrics

from fedpriv.audit.pairing import MAX_MATCH_PAIRS

__all__ = [
    "SUPPORT_TOLERANCE",
    "GuessScores",
    "ReconstructionScore",
    "guess_scores",
    "identification_hits",
    "image_ssim",
    "label_accuracy",
    "match_reconstructions",
    "pair_scores",
    "paired_ssim",
    "relative_leakage",
    "score_reconstruction",
    "ssim_and_support",
    "support_mask",
    "support_ssim",
]

SSIM_KIND = "skimage.metrics.structural_similarity (7x7 uniform window, data_range=1)"
#: How far (in [0, 1] pixel units) a pixel must lie from the background to be on the support:
#: one grey level of an 8-bit image.
SUPPORT_TOLERANCE = 1.0 / 255.0
_CHUNK_BYTES = 2**25
"""Bytes of pixel differences computed at once (the cost matrix is filled in column blocks)."""


def _unit(images: np.ndarray, data_range: tuple[float, float]) -> np.ndarray:
    low, high = data_range
    return ((np.asarray(images, dtype=np.float64) - low) / (high - low)).clip(0.0, 1.0)


def _window(image: np.ndarray) -> int:
    win = min(7, *image.shape[1:])
    return win - (1 - win % 2)


def image_ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two ``(C, H, W)`` images in [0, 1]; the window shrinks for images under 7 px."""
    return float(metrics.structural_similarity(a, b, data_range=1.0, channel_axis=0,
                                               win_size=_window(a)))


def paired_ssim(images: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """SSIM of each aligned pair of ``(n, C, H, W)`` images in [0, 1]."""
    return np.array([image_ssim(a, b) for a, b in zip(images, truth, strict=True)])


def support_mask(truth: np.ndarray, tolerance: float = SUPPORT_TOLERANCE) -> np.ndarray:
    """The digit's support of a ``(C, H, W)`` true image in [0, 1]: the pixels (any channel)
    more than ``tolerance`` from the background, the median of the image's outermost pixels
    (black for digits and Fashion-MNIST). Boolean ``(H, W)``."""
    image = np.asarray(truth, dtype=np.float64)
    border = np.concatenate([image[:, 0].ravel(), image[:, -1].ravel(),
                             image[:, :, 0].ravel(), image[:, :, -1].ravel()])
    return (np.abs(image - np.median(border)) > tolerance).any(axis=0)


def support_ssim(a: np.ndarray, truth: np.ndarray, mask: np.ndarray | None = None) -> float:
    """SSIM of ``a`` against the true image ``truth`` (``(C, H, W)`` in [0, 1]) on the truth's
    support only: scikit-image's SSIM map (``full=True``, the same window as
    :func:`image_ssim`) averaged over the support pixels (:func:`support_mask`, or ``mask``)
    inside the border strip :func:`image_ssim` leaves out, per channel, then over channels.
    With the whole image as the mask it is :func:`image_ssim`. NaN where the support is empty.
    """
    return ssim_and_support(a, truth, mask)[1]


def ssim_and_support(a: np.ndarray, truth: np.ndarray, mask: np.ndarray | None = None
                     ) -> tuple[float, float]:
    """:func:`image_ssim` and :func:`support_ssim` of one pair from one SSIM map: scikit-image
    returns the whole image's mean with the map (``full=True``), so the pair is compared once."""
    win = _window(truth)
    whole, full = metrics.structural_similarity(a, truth, data_range=1.0, channel_axis=0,
                                                win_size=win, full=True)
    keep = support_mask(truth) if mask is None else np.asarray(mask, dtype=bool)
    pad = (win - 1) // 2
    inside = np.zeros_like(keep)
    inside[pad:keep.shape[0] - pad, pad:keep.shape[1] - pad] = True
    keep = keep & inside
    if not keep.any():
        return float(whole), math.nan
    return float(whole), float(np.mean([channel[keep].mean(dtype=np.float64)
                                        for channel in full]))


def identification_hits(guesses: np.ndarray, truth: np.ndarray,
                        distractors: np.ndarray) -> np.ndarray:
    """Whether the attacker's images identify each true image among look-alikes
    (privacy-math.md §13).

    Candidate set ``i`` is ``truth[i]`` with ``distractors[i]`` (``M − 1`` images). The
    attacker names the candidate nearest (MSE) to *any* of its images — it does not know which
    of its images belongs to which true image, so the minimum-MSE matching to the truth, which
    would pick for each true image the reconstruction closest to it, takes no part (with it
    even random images identify above chance). A success counts only when the true image is
    strictly nearer than every distractor (a tie is a miss).

    Parameters
    ----------
    guesses
        ``(n, C, H, W)``: the attacker's images (its reconstructions), in any order.
    truth
        ``(m, C, H, W)``: the true images.
    distractors
        ``(m, M − 1, C, H, W)``: the public look-alikes of each true image.
    """
    flat = np.asarray(guesses, dtype=np.float64).reshape(len(guesses), 1, -1)
    hits = np.zeros(len(truth), dtype=bool)
    for i, (true, others) in enumerate(zip(truth, distractors, strict=True)):
        candidates = np.concatenate([np.asarray(true, np.float64)[None],
                                     np.asarray(others, np.float64)]).reshape(1, len(others) + 1,
                                                                               -1)
        nearest = ((flat - candidates) ** 2).mean(axis=2).min(axis=0)
        hits[i] = nearest[0] < nearest[1:].min(initial=np.inf)
    return hits


def match_reconstructions(reconstructions: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Index of the reconstruction assigned to each true image (min total pairwise MSE).

    With fewer reconstructions than true images the unmatched true images get ``-1``. The
    pairwise MSE is computed exactly, in blocks of true images (:data:`_CHUNK_BYTES` of
    differences at a time), so memory is the ``(n, m)`` cost matrix, at most
    :data:`~fedpriv.audit.pairing.MAX_MATCH_PAIRS` pairs (ValueError beyond).
    """
    n, m = len(reconstructions), len(truth)
    if n * m > MAX_MATCH_PAIRS:
        raise ValueError(f"matching {n} reconstructions to {m} true images needs {n * m:,} "
                         f"pairs, over the limit of {MAX_MATCH_PAIRS:,}")
    pixels = int(np.prod(truth.shape[1:]))
    recon = reconstructions.astype(np.float64).reshape(n, pixels)
    true = truth.astype(np.float64).reshape(m, pixels)
    cost = np.empty((n, m))
    block = max(1, _CHUNK_BYTES // (8 * max(1, n * pixels)))
    for start in range(0, m, block):
        diff = recon[:, None] - true[None, start:start + block]
        cost[:, start:start + block] = (diff**2).mean(axis=2)
    rows, cols = linear_sum_assignment(cost)
    order = np.full(len(truth), -1, dtype=np.int64)
    order[cols] = rows
    return order


def label_accuracy(recovered: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of the true labels recovered, as multisets (order-free, counts duplicates)."""
    hits = Counter(np.asarray(recovered).tolist()) & Counter(np.asarray(truth).tolist())
    return sum(hits.values()) / len(truth)


def relative_leakage(ssim_reconstruction: np.ndarray, ssim_prior: np.ndarray) -> np.ndarray:
    """Relative data leakage value (SSIM(recon, x) − SSIM(prior, x)) / SSIM(prior, x).

    As in NVFlare's gradient-inversion leakage study (Hatamizadeh et al. 2023, "Do gradient
    inversion attacks make federated learning unsafe?", §III-D). fedpriv's "prior" here is the
    label prior of :mod:`attacks.estimators.prior` (the public class means of the labels the
    update gives away: leakage beyond the labels), not the attack's random start, which would
    overstate leakage. NaN where SSIM(prior, x) ≤ 0, for which the ratio is meaningless.
    """
    recon = np.asarray(ssim_reconstruction, dtype=np.float64)
    prior = np.asarray(ssim_prior, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prior > 0, (recon - prior) / prior, np.nan)


@dataclass(frozen=True, eq=False)
class GuessScores:
    """A guess's per-true-image MSE, PSNR, SSIM and support SSIM (:func:`support_ssim`)."""

    mse: np.ndarray
    psnr: np.ndarray
    ssim: np.ndarray
    support_ssim: np.ndarray

    def means(self) -> dict[str, float]:
        """The batch means (NaN where nothing was scored)."""
        return {"mse": _mean(self.mse), "psnr": _mean(self.psnr), "ssim": _mean(self.ssim),
                "support_ssim": _mean(self.support_ssim)}

    def gain_over(self, prior: GuessScores) -> dict[str, float]:
        """Mean of the per-image gains (score − prior's score) in SSIM, PSNR, support SSIM."""
        return {"ssim": _mean(self.ssim - prior.ssim),
                "psnr": _mean(_difference(self.psnr, prior.psnr)),
                "support_ssim": _mean(self.support_ssim - prior.support_ssim)}


@dataclass(frozen=True, eq=False)
class ReconstructionScore:
    """Per-true-image scores, in truth order.

    A true image left unmatched (the attacker reconstructed fewer images than the batch held,
    e.g. under Poisson sampling) scores as the label prior's guess for it when a prior was
    given, NaN otherwise; ``prior_*`` are the label prior's own scores and ``no_update`` the
    no-update prior's (None without them; :mod:`attacks.estimators.prior`).
    """

    order: np.ndarray
    mse: np.ndarray
    psnr: np.ndarray
    ssim: np.ndarray
    relative_leakage: np.ndarray | None
    label_accuracy: float | None
    prior_mse: np.ndarray | None = None
    prior_psnr: np.ndarray | None = None
    prior_ssim: np.ndarray | None = None
    support_ssim: np.ndarray | None = None
    prior_support_ssim: np.ndarray | None = None
    no_update: GuessScores | None = None

    @property
    def matched(self) -> int:
        """Number of true images with a reconstruction."""
        return int(np.sum(self.order >= 0))

    @property
    def best(self) -> int | None:
        """Index of the matched true image that leaked most (highest SSIM); None if none."""
        if not self.matched:
            return None
        return int(np.nanargmax(np.where(self.order >= 0, self.ssim, -np.inf)))

    def summary(self) -> dict[str, float | int | str | None]:
        """Batch means over every true image (unmatched ones at the label prior's score, or
        left out without a prior), the best (max-leak) image's scores, label accuracy, relative
        leakage against the label prior; the label prior's means with the gains over it
        (``prior_*``, ``gain_*``) and the no-update prior's with the gains over it
        (``no_update_prior_*``, ``no_update_gain_*``), None without them; NaN where nothing
        was scored."""
        b, rel = self.best, self.relative_leakage
        pick = (lambda a: float(a[b])) if b is not None else (lambda a: math.nan)
        own = GuessScores(self.mse, self.psnr, self.ssim, self._support())
        priors: dict[str, float | None] = {}
        for name, guess in (("prior", self._label_prior()), ("no_update_prior", self.no_update)):
            gain = "gain" if name == "prior" else "no_update_gain"
            keys = ("mse", "psnr", "ssim", "support_ssim")
            priors |= {f"{name}_{k}": None if guess is None else v
                       for k, v in (guess.means() if guess else dict.fromkeys(keys)).items()}
            priors |= {f"{gain}_{k}": None if guess is None else v
                       for k, v in (own.gain_over(guess) if guess
                                    else dict.fromkeys(("ssim", "psnr", "support_ssim"))).items()}
        return {
            "mse": _mean(self.mse),
            "psnr": _mean(self.psnr),
            "ssim": _mean(self.ssim),
            "support_ssim": _mean(own.support_ssim),
            "matched": self.matched,
            "batch_size": len(self.order),
            "best_index": b,
            "best_mse": pick(self.mse),
            "best_psnr": pick(self.psnr),
            "best_ssim": pick(self.ssim),
            "label_accuracy": self.label_accuracy,
            "relative_leakage": None if rel is None else _mean(rel),
            "best_relative_leakage": None if rel is None else pick(rel),
            **priors,
            "ssim_kind": SSIM_KIND,
        }

    def _support(self) -> np.ndarray:
        return np.full(len(self.order), np.nan) if self.support_ssim is None else self.support_ssim

    def _label_prior(self) -> GuessScores | None:
        if self.prior_ssim is None or self.prior_mse is None or self.prior_psnr is None:
            return None
        support = (np.full(len(self.order), np.nan) if self.prior_support_ssim is None
                   else self.prior_support_ssim)
        return GuessScores(self.prior_mse, self.prior_psnr, self.prior_ssim, support)


def _difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a − b`` elementwise, 0 where both are the same infinity (an exact image twice)."""
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, a - b)


def _mean(values: np.ndarray) -> float:
    finite_or_inf = values[~np.isnan(values)]
    return float(finite_or_inf.mean()) if finite_or_inf.size else math.nan


def _errors(recon: np.ndarray, true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MSE and PSNR of aligned pairs of ``(n, C, H, W)`` images in [0, 1]."""
    pairs = list(zip(recon, true, strict=True))
    mse = np.array([metrics.mean_squared_error(t, r) for r, t in pairs])
    with np.errstate(divide="ignore"):
        psnr = np.array([metrics.peak_signal_noise_ratio(t, r, data_range=1.0) for r, t in pairs])
    return mse, psnr


def pair_scores(recon: np.ndarray, true: np.ndarray) -> tuple[np.ndarray, ...]:
    """MSE, PSNR, SSIM of aligned pairs of ``(n, C, H, W)`` images in [0, 1]."""
    return (*_errors(recon, true), paired_ssim(recon, true))


def guess_scores(recon: np.ndarray, true: np.ndarray) -> GuessScores:
    """:func:`pair_scores` and the support SSIM of aligned pairs, as :class:`GuessScores`
    (each pair's SSIM map computed once: :func:`ssim_and_support`)."""
    both = np.array([ssim_and_support(r, t) for r, t in zip(recon, true, strict=True)],
                    dtype=np.float64).reshape(len(true), 2)
    return GuessScores(*_errors(recon, true), both[:, 0], both[:, 1])


def _in_truth_order(values: np.ndarray, hit: np.ndarray, fill: np.ndarray | None) -> np.ndarray:
    out = np.full(len(hit), np.nan) if fill is None else np.array(fill, dtype=np.float64)
    out[hit] = values
    return out


def _unit_guess(guess: np.ndarray | None, true: np.ndarray,
                data_range: tuple[float, float]) -> np.ndarray | None:
    if guess is None:
        return None
    unit = _unit(guess, data_range)
    if unit.shape != true.shape:
        raise ValueError(f"prior of shape {unit.shape} for truth of shape {true.shape}")
    return unit


def score_reconstruction(
    reconstructions: np.ndarray,
    truth: np.ndarray,
    *,
    prior: np.ndarray | None = None,
    no_update_prior: np.ndarray | None = None,
    recovered_labels: np.ndarray | None = None,
    true_labels: np.ndarray | None = None,
    data_range: tuple[float, float] = (0.0, 1.0),
) -> ReconstructionScore:
    """Match reconstructions to the true batch and score each pair.

    Parameters
    ----------
    reconstructions, truth
        ``(n, C, H, W)`` and ``(m, C, H, W)`` images in ``data_range``; with ``n < m`` the
        ``m − n`` true images not matched score as the label prior's guess (NaN without one).
    prior
        The label prior's guess for each true image, ``(m, C, H, W)`` in truth order
        (:func:`attacks.estimators.prior.prior_baseline`): the public class means of the labels
        the update gives away. Enables its scores, the gains over it and the relative leakage.
    no_update_prior
        The no-update prior's guess for each true image (the public mean image: what the
        attacker has before any update), same shape; enables its scores and the gains over it.
    recovered_labels, true_labels
        Enable the label-recovery accuracy (multiset match).
    """
    recon, true = _unit(reconstructions, data_range), _unit(truth, data_range)
    order = match_reconstructions(recon, true)
    hit = order >= 0
    own = guess_scores(recon[order[hit]], true[hit])
    label_guess = _unit_guess(prior, true, data_range)
    label = None if label_guess is None else guess_scores(label_guess, true)
    no_update_guess = _unit_guess(no_update_prior, true, data_range)
    no_update = None if no_update_guess is None else guess_scores(no_update_guess, true)
    fields = ("mse", "psnr", "ssim", "support_ssim")
    scores = {k: _in_truth_order(getattr(own, k), hit, None if label is None else getattr(label, k))
              for k in fields}
    rel = None if label is None else relative_leakage(scores["ssim"], label.ssim)
    labels = None
    if recovered_labels is not None and true_labels is not None and len(true_labels):
        labels = label_accuracy(recovered_labels, true_labels)
    return ReconstructionScore(
        order, scores["mse"], scores["psnr"], scores["ssim"], rel, labels,
        *((None,) * 3 if label is None else (label.mse, label.psnr, label.ssim)),
        support_ssim=scores["support_ssim"],
        prior_support_ssim=None if label is None else label.support_ssim, no_update=no_update,
    )
