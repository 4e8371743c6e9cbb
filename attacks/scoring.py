"""Scores of a reconstruction against the ground truth (privacy-math.md §7).

All scores are computed in [0, 1] pixel space (images in another data range are rescaled
first) with scikit-image: ``mean_squared_error``, ``peak_signal_noise_ratio`` and
``structural_similarity`` (the plain Wang et al. 2004 SSIM: 7×7 uniform window, ``data_range=1``,
averaged over channels — *not* the wavelet SSIM some attack frameworks call "SSIM").
Reconstructions come in unknown order, so they are first matched to the true images by a
minimum-cost assignment on pairwise MSE (``scipy.optimize.linear_sum_assignment``).

Every true image counts in every mean: one the attack returned no reconstruction for is scored
as the prior baseline's guess for it (:mod:`attacks.estimators.prior`), so returning fewer
images than the batch gains nothing on those images instead of vanishing from the mean.

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
    "ReconstructionScore",
    "image_ssim",
    "label_accuracy",
    "match_reconstructions",
    "pair_scores",
    "paired_ssim",
    "relative_leakage",
    "score_reconstruction",
]

SSIM_KIND = "skimage.metrics.structural_similarity (7x7 uniform window, data_range=1)"
_CHUNK_BYTES = 2**25
"""Bytes of pixel differences computed at once (the cost matrix is filled in column blocks)."""


def _unit(images: np.ndarray, data_range: tuple[float, float]) -> np.ndarray:
    low, high = data_range
    return ((np.asarray(images, dtype=np.float64) - low) / (high - low)).clip(0.0, 1.0)


def image_ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two ``(C, H, W)`` images in [0, 1]; the window shrinks for images under 7 px."""
    win = min(7, *a.shape[1:])
    win -= 1 - win % 2
    return float(metrics.structural_similarity(a, b, data_range=1.0, channel_axis=0, win_size=win))


def paired_ssim(images: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """SSIM of each aligned pair of ``(n, C, H, W)`` images in [0, 1]."""
    return np.array([image_ssim(a, b) for a, b in zip(images, truth, strict=True)])


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
    inversion attacks make federated learning unsafe?", §III-D). fedpriv's "prior" is the prior
    baseline of :mod:`attacks.estimators.prior` (what the attacker guesses without the update),
    not the attack's random start, which would overstate leakage. NaN where SSIM(prior, x) ≤ 0, for
    which the ratio is meaningless.
    """
    recon = np.asarray(ssim_reconstruction, dtype=np.float64)
    prior = np.asarray(ssim_prior, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prior > 0, (recon - prior) / prior, np.nan)


@dataclass(frozen=True, eq=False)
class ReconstructionScore:
    """Per-true-image scores, in truth order.

    A true image left unmatched (the attacker reconstructed fewer images than the batch held,
    e.g. under Poisson sampling) scores as the prior's guess for it when a prior was given,
    NaN otherwise; ``prior_*`` are the prior guesses' own scores (None without a prior).
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
        """Batch means over every true image (unmatched ones at the prior's score, or left out
        without a prior), the best (max-leak) image's scores, label accuracy, relative leakage
        against the prior, and the prior's means with the gains (score − prior; None without a
        prior); NaN where nothing was scored."""
        b, rel = self.best, self.relative_leakage
        pick = (lambda a: float(a[b])) if b is not None else (lambda a: math.nan)
        prior = {"prior_mse": None, "prior_psnr": None, "prior_ssim": None,
                 "gain_ssim": None, "gain_psnr": None}
        if self.prior_ssim is not None:
            prior = {"prior_mse": _mean(self.prior_mse), "prior_psnr": _mean(self.prior_psnr),
                     "prior_ssim": _mean(self.prior_ssim),
                     "gain_ssim": _mean(self.ssim - self.prior_ssim),
                     "gain_psnr": _mean(_difference(self.psnr, self.prior_psnr))}
        return {
            "mse": _mean(self.mse),
            "psnr": _mean(self.psnr),
            "ssim": _mean(self.ssim),
            "matched": self.matched,
            "batch_size": len(self.order),
            "best_index": b,
            "best_mse": pick(self.mse),
            "best_psnr": pick(self.psnr),
            "best_ssim": pick(self.ssim),
            "label_accuracy": self.label_accuracy,
            "relative_leakage": None if rel is None else _mean(rel),
            "best_relative_leakage": None if rel is None else pick(rel),
            **prior,
            "ssim_kind": SSIM_KIND,
        }


def _difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a − b`` elementwise, 0 where both are the same infinity (an exact image twice)."""
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, a - b)


def _mean(values: np.ndarray) -> float:
    finite_or_inf = values[~np.isnan(values)]
    return float(finite_or_inf.mean()) if finite_or_inf.size else math.nan


def pair_scores(recon: np.ndarray, true: np.ndarray) -> tuple[np.ndarray, ...]:
    """MSE, PSNR, SSIM of aligned pairs of ``(n, C, H, W)`` images in [0, 1]."""
    pairs = list(zip(recon, true, strict=True))
    mse = np.array([metrics.mean_squared_error(t, r) for r, t in pairs])
    with np.errstate(divide="ignore"):
        psnr = np.array([metrics.peak_signal_noise_ratio(t, r, data_range=1.0) for r, t in pairs])
    return mse, psnr, paired_ssim(recon, true)


def _in_truth_order(values: np.ndarray, hit: np.ndarray, fill: np.ndarray | None) -> np.ndarray:
    out = np.full(len(hit), np.nan) if fill is None else np.array(fill, dtype=np.float64)
    out[hit] = values
    return out


def score_reconstruction(
    reconstructions: np.ndarray,
    truth: np.ndarray,
    *,
    prior: np.ndarray | None = None,
    recovered_labels: np.ndarray | None = None,
    true_labels: np.ndarray | None = None,
    data_range: tuple[float, float] = (0.0, 1.0),
) -> ReconstructionScore:
    """Match reconstructions to the true batch and score each pair.

    Parameters
    ----------
    reconstructions, truth
        ``(n, C, H, W)`` and ``(m, C, H, W)`` images in ``data_range``; with ``n < m`` the
        ``m − n`` true images not matched score as the prior's guess (NaN without a prior).
    prior
        The prior baseline's guess for each true image, ``(m, C, H, W)`` in truth order
        (:func:`attacks.estimators.prior.prior_baseline`): what the attacker knew without the
        update.
        Enables the prior's scores, the gains and the relative leakage value against it.
    recovered_labels, true_labels
        Enable the label-recovery accuracy (multiset match).
    """
    recon, true = _unit(reconstructions, data_range), _unit(truth, data_range)
    order = match_reconstructions(recon, true)
    hit = order >= 0
    mse, psnr, ssim = pair_scores(recon[order[hit]], true[hit])
    base: tuple[np.ndarray | None, ...] = (None, None, None)
    rel = None
    if prior is not None:
        guess = _unit(prior, data_range)
        if guess.shape != true.shape:
            raise ValueError(f"prior of shape {guess.shape} for truth of shape {true.shape}")
        base = pair_scores(guess, true)
    scores = [_in_truth_order(v, hit, b) for v, b in zip((mse, psnr, ssim), base, strict=True)]
    if prior is not None:
        rel = relative_leakage(scores[2], base[2])
    labels = None
    if recovered_labels is not None and true_labels is not None and len(true_labels):
        labels = label_accuracy(recovered_labels, true_labels)
    return ReconstructionScore(order, *scores, rel, labels, *base)
