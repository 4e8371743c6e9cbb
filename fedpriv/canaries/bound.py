"""The result every canary estimator returns, and the argument checks they share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedpriv.validate import check_probability, check_scores

__all__ = ["EpsilonLowerBound", "check_audit_inputs"]


@dataclass(frozen=True)
class EpsilonLowerBound:
    """An empirical ε at δ from canary scores: a lower bound on the ε of the canary's releases.

    Attributes
    ----------
    epsilon
        The bound (``0`` when the scores falsify nothing).
    delta, confidence
        The δ it is stated at, and the probability that it holds (over the mechanism's and the
        inclusion bits' randomness) when its assumptions hold.
    method
        ``"clopper-pearson"``, ``"one-run"``, ``"gdp-fit"`` or ``"gdp-thresholds"``.
    rigorous
        True when validity needs nothing but the (ε, δ)-DP definition and independent
        ½-inclusion; False for estimates that also assume something about the scores.
    assumption
        What validity rests on, in words.
    canaries
        Number of canaries in the audit (in + out).
    detail
        Method-specific numbers: threshold, counts, guesses, the GDP μ, …
    """

    epsilon: float
    delta: float
    confidence: float
    method: str
    rigorous: bool
    assumption: str
    canaries: int
    detail: Mapping[str, float | int | bool] = field(default_factory=dict)


def check_audit_inputs(
    in_scores: Any, out_scores: Any, delta: Any, confidence: Any
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Validated ``(in_scores, out_scores, δ, confidence)``; higher scores must mean "in"."""
    return (check_scores("in_scores", in_scores), check_scores("out_scores", out_scores),
            check_probability("delta", delta), check_probability("confidence", confidence))
