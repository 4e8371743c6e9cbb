"""Empirical Bayesian privacy of a reconstruction attack (privacy-math.md §6).

A candidate pool 𝒟 (the client's records, or its batch plus distractors) has a uniform
prior. The attack runs K times (restarts, seeds); each reconstruction is matched to its
nearest candidate by SSIM and counted when the SSIM reaches a threshold. The counts give the
attacker's posterior F^A(d) = (n_d + a)/(Σn + a|𝒟|); from it the MBP estimate
ξ̂ = max_d |log(F^A(d)·|𝒟|)| and the ABP estimate ε̂_pa = sqrt(JS(F^A ‖ uniform))
(Zhang & Chen, "Bridging privacy and robustness for trustworthy machine learning"),
computed by :mod:`fedpriv.leakage.bayesian`. Needs ground truth: simulation or canaries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attacks.result import AttackResult
from attacks.scoring import image_ssim
from fedpriv.errors import InputError

__all__ = ["BayesianPrivacyEstimate", "candidate_counts", "estimate_bayesian_privacy"]


@dataclass(frozen=True, eq=False)
class BayesianPrivacyEstimate:
    """ξ̂ and ε̂_pa with everything needed to read them (K, threshold, |𝒟|, a)."""

    mbp: float
    abp: float
    runs: int
    reconstructions: int
    threshold: float
    pool_size: int
    smoothing: float
    counts: np.ndarray
    posterior: np.ndarray
    bound: float

    def summary(self) -> dict[str, float | int | bool | str]:
        """Flat record for reports; ``within_bound`` compares ξ̂ with the pure-LDP bound ξ."""
        return {
            "mbp_estimate": self.mbp,
            "abp_estimate": self.abp,
            "runs": self.runs,
            "reconstructions": self.reconstructions,
            "threshold": self.threshold,
            "pool_size": self.pool_size,
            "smoothing": self.smoothing,
            "matched": int(self.counts.sum()),
            "metric": "ssim",
            "mbp_bound": self.bound,
            "within_bound": bool(self.mbp <= self.bound),
        }


def candidate_counts(
    reconstructions: np.ndarray, candidates: np.ndarray, threshold: float
) -> np.ndarray:
    """n_d: how many reconstructions have candidate d as nearest (max SSIM) at SSIM ≥ threshold.

    Images are ``(C, H, W)`` in [0, 1].
    """
    counts = np.zeros(len(candidates), dtype=np.int64)
    for recon in reconstructions:
        ssim = np.array([image_ssim(recon, c) for c in candidates])
        nearest = int(np.argmax(ssim))
        if ssim[nearest] >= threshold:
            counts[nearest] += 1
    return counts


def _check(runs: Sequence[np.ndarray], candidates: np.ndarray, threshold: float, a: float) -> None:
    if len(runs) < 1:
        raise InputError("bayes.runs", len(runs), "at least one attack run (K >= 1)")
    if len(candidates) < 2:
        raise InputError("bayes.pool_size", len(candidates), "a candidate pool of >= 2 records")
    if not (math.isfinite(threshold) and -1 <= threshold <= 1):
        raise InputError("bayes.threshold", threshold, "an SSIM threshold in [-1, 1]")
    if not (math.isfinite(a) and a >= 0):
        raise InputError("bayes.smoothing", a, "a finite number >= 0")


def estimate_bayesian_privacy(
    runs: Sequence[AttackResult | np.ndarray],
    candidates: np.ndarray,
    *,
    threshold: float = 0.5,
    smoothing: float = 1.0,
    bound: float = math.inf,
) -> BayesianPrivacyEstimate:
    """Empirical MBP ξ̂ and ABP ε̂_pa from K attack runs (privacy-math.md §6).

    Parameters
    ----------
    runs
        The K attack runs: :class:`AttackResult` objects or their ``(n, C, H, W)``
        reconstructions, in [0, 1].
    candidates
        The pool 𝒟, ``(|𝒟|, C, H, W)`` in [0, 1], uniform prior.
    threshold
        Minimum SSIM for a reconstruction to count for its nearest candidate.
    smoothing
        Additive smoothing a ≥ 0 of the posterior (a = 0 needs at least one match).
    bound
        The mechanism's pure-LDP parameter ξ (``Mechanism.pure_ldp_epsilon``; ``inf`` when
        none exists), reported beside ξ̂ with ``within_bound``.
    """
    from fedpriv.leakage.bayesian import abp_estimate, mbp_estimate, posterior_from_matches

    _check(runs, candidates, threshold, smoothing)
    images = [r.reconstructions if isinstance(r, AttackResult) else np.asarray(r) for r in runs]
    counts = sum(candidate_counts(rec, candidates, threshold) for rec in images)
    posterior = np.asarray(posterior_from_matches(counts, len(candidates), smoothing))
    return BayesianPrivacyEstimate(
        mbp=float(mbp_estimate(posterior, len(candidates))),
        abp=float(abp_estimate(posterior)),
        runs=len(images),
        reconstructions=sum(len(rec) for rec in images),
        threshold=float(threshold),
        pool_size=len(candidates),
        smoothing=float(smoothing),
        counts=np.asarray(counts),
        posterior=posterior,
        bound=float(bound),
    )
