"""The identification game: empirical leakage in Bayes-capacity units (privacy-math.md §13).

A secret is drawn uniformly from ``M`` candidates (prior vulnerability ``1/M``); an adversary
sees one release about it and names a candidate. Over ``n`` independent trials with ``k``
successes, ``P̂ = k/n`` estimates the posterior Bayes vulnerability, and the multiplicative
leakage ``M·P(correct)`` is at most the Bayes capacity of the release restricted to the
candidates (Biswas et al. §IV–V; privacy-math.md §5), itself at most ``M``. The interval on
``P`` is Clopper–Pearson (``scipy.stats.binomtest(...).proportion_ci(method="exact")``): with
confidence ``1 − a`` it covers ``P`` whatever the attacker — provided the trials are
independent draws of one ``P`` (fresh noise each; re-using one noise draw breaks it, §13).

The flag is a test. Its null: ``P ≤ P₀ = exp(log_bound)/M`` (the release leaks no more than the
bound). The exact binomial p-value ``P(Binomial(n, P₀) ≥ k)`` is below ``a/2`` exactly when the
interval's lower end lies above ``P₀``; ``scale_beta`` (the probability that the trials' noise
scale fell below the declared one for an honest client, attacks/estimators/game.py) is added,
a union bound. Over a run the p-values of all client-rounds are adjusted by Holm's step-down
(S. Holm, Scand. J. Statist. 6(2), 1979; :func:`fedpriv.verification.multiple.holm`) in the
report: a flag there is family-wise at ``audit.game_alpha``.

The Bayesian-privacy estimates (§6) come from the same game. The attacker's decisions induce a
posterior over the candidates given its guess: ``F^A(guess) = P`` and ``(1 − P)/(M − 1)`` on each
other candidate (the game is symmetric in the candidates: the secret is uniform), so
``ξ̂ = max(|log(M P)|, |log(M(1−P)/(M−1))|)`` and ``ε̂_pa = sqrt(JS(F^A ‖ uniform))``. Both are
zero at ``P = 1/M`` and grow monotonically away from it, so their intervals are the images of
the interval on ``P``.

References
----------
.. [1] M. Biswas et al., Bayes capacity as a reconstruction-risk measure (privacy-math.md §5).
.. [2] X. Zhang, T. Chen, "Bridging privacy and robustness for trustworthy machine learning".
.. [3] C. J. Clopper, E. S. Pearson, "The use of confidence or fiducial limits illustrated in
   the case of the binomial", Biometrika 26(4), 404–413, 1934.
.. [4] S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist.
   6(2), 65–70, 1979.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from fedpriv.errors import InputError
from fedpriv.leakage.bayesian import abp_estimate
from fedpriv.validate import check_dim, check_probability

__all__ = ["GAME_ATTACK", "IdentificationLeakage", "identification_leakage", "symmetric_mbp"]

#: The ``attack`` name of the game's rows in the audit store's ``attacks`` table.
GAME_ATTACK = "game"


def symmetric_mbp(p: float, candidates: int) -> float:
    """``ξ`` of the posterior ``(P, (1−P)/(M−1), …)``; ``inf`` at ``P = 1`` (empty mass)."""
    m = candidates
    terms = [abs(math.log(m * p)) if p > 0 else math.inf]
    rest = m * (1.0 - p) / (m - 1)
    terms.append(abs(math.log(rest)) if rest > 0 else 0.0)  # zero mass: left out as in §6
    return max(terms)


def _symmetric_abp(p: float, candidates: int) -> float:
    rest = (1.0 - p) / (candidates - 1)
    return abp_estimate([p] + [rest] * (candidates - 1))


def _log_mp(p: float, candidates: int) -> float | None:
    return math.log(candidates * p) if p > 0 else None


def _image(fn, lo: float, hi: float, centre: float, candidates: int) -> tuple[float, float]:
    """Range of a function that is 0 at ``centre`` and grows away from it, over [lo, hi]."""
    ends = [fn(lo, candidates), fn(hi, candidates)]
    low = 0.0 if lo <= centre <= hi else min(ends)
    return low, max(ends)


@dataclass(frozen=True)
class IdentificationLeakage:
    """``log(M·P̂)`` with its Clopper–Pearson interval beside the bound ``log_bound``.

    ``log_value``/``log_lower`` are ``None`` when their ``P`` is 0 (``log 0``).
    """

    successes: int
    trials: int
    candidates: int
    confidence: float
    log_value: float | None
    log_lower: float | None
    log_upper: float
    log_bound: float
    mbp: float
    mbp_interval: tuple[float, float]
    abp: float
    abp_interval: tuple[float, float]
    p_value: float

    def summary(self) -> dict[str, float | int | None]:
        """The ``empirical_leakage`` record of report.json."""
        return {
            "log_value": self.log_value, "log_lower": self.log_lower,
            "log_upper": self.log_upper, "log_bound": self.log_bound,
            "candidates": self.candidates, "trials": self.trials,
            "confidence": self.confidence, "successes": self.successes,
            "p_value": self.p_value,
        }  # fmt: skip


def identification_leakage(
    successes: int, trials: int, candidates: int, log_capacity: float,
    confidence: float = 0.95, *, scale_beta: float = 0.0,
) -> IdentificationLeakage:
    """Empirical multiplicative leakage of an identification game (privacy-math.md §13).

    Parameters
    ----------
    successes, trials
        ``k`` correct guesses out of ``n ≥ 1`` independent trials.
    candidates
        ``M ≥ 2``, the number of candidates (uniform prior ``1/M``).
    log_capacity
        ``log C`` of the release restricted to the candidates (or any upper bound on it, e.g.
        §5's formula); ``inf`` when the release has no bound. The reported ``log_bound`` is
        ``min(log C, log M)``: no game over ``M`` candidates can show more than ``log M``.
    confidence
        Two-sided confidence of the Clopper–Pearson interval on ``P`` (C. J. Clopper,
        E. S. Pearson, Biometrika 26(4), 1934).
    scale_beta
        Added to the p-value of ``P ≤ exp(log_bound)/M``: the probability, under an honest
        client, that the trials' noise was drawn below the declared scale (0 when they drew it
        at the declared scale).
    """
    trials = check_dim("trials", trials)
    candidates = check_dim("candidates", candidates, minimum=2)
    if int(successes) != successes or not 0 <= successes <= trials:
        raise InputError("successes", successes, f"an integer in [0, {trials}]")
    confidence = check_probability("confidence", confidence)
    if not 0 <= scale_beta < 1:
        raise InputError("scale_beta", scale_beta, "a number in [0, 1)")
    if math.isnan(log_capacity) or log_capacity < 0:
        raise InputError("log_capacity", log_capacity, "a log Bayes capacity >= 0 (inf allowed)")
    successes = int(successes)
    ci = stats.binomtest(successes, trials).proportion_ci(confidence, method="exact")
    p_hat, lo, hi = successes / trials, float(ci.low), float(ci.high)
    centre = 1.0 / candidates
    log_bound = min(float(log_capacity), math.log(candidates))
    null = min(1.0, math.exp(log_bound) / candidates)
    p_value = min(1.0, float(stats.binom.sf(successes - 1, trials, null)) + scale_beta)
    return IdentificationLeakage(
        successes=successes, trials=trials, candidates=candidates, confidence=confidence,
        log_value=_log_mp(p_hat, candidates), log_lower=_log_mp(lo, candidates),
        log_upper=math.log(candidates * hi), log_bound=log_bound,
        mbp=symmetric_mbp(p_hat, candidates),
        mbp_interval=_image(symmetric_mbp, lo, hi, centre, candidates),
        abp=_symmetric_abp(p_hat, candidates),
        abp_interval=_image(_symmetric_abp, lo, hi, centre, candidates), p_value=p_value,
    )
