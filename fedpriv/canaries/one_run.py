"""ε lower bound from one run with many canaries (Steinke, Nasr & Jagielski 2023).

``m`` canaries are each in with probability ½, independently. The auditor guesses from the
scores alone — "in" for the ``k`` highest, and (two-sided) "out" for the ``k`` lowest —
abstaining on the rest: ``r`` guesses, ``W`` of them correct. If the run is (ε, δ)-DP with
respect to each single canary, then for every ``v``

    ``P[W ≥ v] ≤ f(v) + 2mδ · max_{i=1..v} (f(v − i) − f(v)) / i``,
    ``f(v) = P[Binomial(r, e^ε/(1 + e^ε)) ≥ v]``

(their main theorem for δ > 0, as in the authors' reference code ``p_value_DP_audit`` and in
``jax_privacy.auditing``; the guesses may depend on each other and on every release — no
independence between canaries is assumed). The right-hand side at the observed ``v`` is a
p-value for "the run is (ε, δ)-DP"; the bound is the ε at which it reaches ``α`` (found by
bracketing and Brent's method as in the authors' code). The p-value rises with ε — checked
on a wide grid in the tests — so every smaller ε is rejected too.

Choosing ``k`` after seeing the scores costs a Bonferroni factor: ``k`` ranges over a grid fixed
in advance (``m/2, m/4, …, 1`` two-sided; ``m, m/2, …, 1`` one-sided) and each ``k`` is tested
at ``α/|grid|``. ``jax_privacy.auditing`` instead tries every threshold with a correction by the
size of the empirical ROC frontier, a data-dependent count.

Rigorous, with two limits to keep in mind: the ``2mδ`` term (the bound collapses unless
``mδ ≪ α``), and a ceiling — with all ``r`` guesses right the bound is about
``log(r / log(1/α))`` — so large ε needs many canaries.

References
----------
.. [1] T. Steinke, M. Nasr, M. Jagielski, "Privacy auditing with one (1) training run",
   NeurIPS 2023, arXiv:2305.08846 (the main theorem for δ > 0; the auditor that guesses the
   top ``k₊`` and bottom ``k₋`` scores and abstains on the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

from fedpriv.canaries.bound import EpsilonLowerBound, check_audit_inputs
from fedpriv.errors import InputError

__all__ = ["epsilon_one_run", "guess_counts", "guess_grid", "one_run_p_value", "one_run_test"]

ASSUMPTION = "each canary in independently with probability 1/2 (Steinke et al. 2023)"


def one_run_p_value(canaries: int, guesses: int, correct: int, epsilon: float,
                    delta: float) -> float:
    """p-value of ``correct`` right out of ``guesses`` under "(ε, δ)-DP" (module docstring)."""
    q = scipy.special.expit(epsilon)
    tail = scipy.stats.binom.sf(correct - 1, guesses, q)
    if delta == 0.0 or correct == 0:
        return float(tail)
    i = np.arange(1, correct + 1)
    window = scipy.stats.binom.sf(correct - i - 1, guesses, q) - tail  # P[v − i ≤ W < v]
    return float(min(1.0, tail + 2.0 * canaries * delta * np.max(window / i)))


def _epsilon(canaries: int, guesses: int, correct: int, delta: float, level: float) -> float:
    """Largest ε whose p-value is ``≤ level`` (0 when even ε = 0 is not rejected)."""
    def objective(eps: float) -> float:
        return level - one_run_p_value(canaries, guesses, correct, eps, delta)

    if guesses == 0 or objective(0.0) <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    while objective(hi) > 0.0:
        lo, hi = hi, 2.0 * hi
    return float(scipy.optimize.brentq(objective, lo, hi, xtol=1e-6))


def guess_grid(canaries: int, two_sided: bool = True) -> tuple[int, ...]:
    """The default values of ``k``: ``⌈k_max/2^i⌉`` down to 1, ``k_max = m/2`` or ``m``."""
    k_max = canaries // 2 if two_sided else canaries
    grid = {-(-k_max // 2**i) for i in range(k_max.bit_length() + 1)}
    return tuple(sorted((k for k in grid if k >= 1), reverse=True))


def guess_counts(
    in_scores: np.ndarray, out_scores: np.ndarray, k: int, two_sided: bool
) -> tuple[int, int]:
    """``(r, v)``: guesses made and guesses right for "top ``k`` in" (and "bottom ``k`` out").

    Sets are defined by score thresholds (all scores tied with the ``k``-th are guessed too),
    so ties are never broken by the labels; scores in both sets are abstained on.
    """
    scores = np.sort(np.concatenate([in_scores, out_scores]))
    top = scores[-k]
    top_in, top_out = int(np.sum(in_scores >= top)), int(np.sum(out_scores >= top))
    if not two_sided:
        return top_in + top_out, top_in
    bottom = scores[k - 1]
    bot_in, bot_out = int(np.sum(in_scores <= bottom)), int(np.sum(out_scores <= bottom))
    both_in = int(np.sum((in_scores >= top) & (in_scores <= bottom)))
    both_out = int(np.sum((out_scores >= top) & (out_scores <= bottom)))
    guesses = top_in + top_out + bot_in + bot_out - 2 * (both_in + both_out)
    return guesses, (top_in - both_in) + (bot_out - both_out)


def epsilon_one_run(
    in_scores: Any,
    out_scores: Any,
    *,
    delta: float,
    confidence: float = 0.95,
    guesses: int | Sequence[int] | None = None,
    two_sided: bool = True,
) -> EpsilonLowerBound:
    """ε lower bound at ``delta`` from one run (module docstring).

    Parameters
    ----------
    in_scores, out_scores
        Scores of the canaries that were in and out; higher means "in". ``m`` is their total.
    delta
        The accountant's δ.
    confidence
        ``1 − α``.
    guesses
        ``k`` fixed in advance (no correction), or a grid of them (Bonferroni over the grid);
        default :func:`guess_grid`.
    two_sided
        Guess "out" for the ``k`` lowest scores too (Steinke et al.'s ``k₋``); one-sided
        guessing is what ``jax_privacy`` implements.

    Returns
    -------
    EpsilonLowerBound
        ``detail``: ``k``, ``guesses`` (``r``), ``correct`` (``v``), ``grid_size``.
    """
    ins, outs, delta, confidence = check_audit_inputs(in_scores, out_scores, delta, confidence)
    m = ins.size + outs.size
    grid = guess_grid(m, two_sided) if guesses is None else np.atleast_1d(guesses).tolist()
    limit = m // 2 if two_sided else m
    if not grid or any(isinstance(k, bool) or k != int(k) or not 1 <= k <= limit for k in grid):
        raise InputError("guesses", guesses, f"integers k in [1, {limit}]")
    level = (1.0 - confidence) / len(grid)
    tried = []
    for k in map(int, grid):
        r, v = guess_counts(ins, outs, k, two_sided)
        tried.append((_epsilon(m, r, v, delta, level), k, r, v))
    eps, k, r, v = max(tried, key=lambda t: t[0])  # the first k on ties
    detail = {"k": k, "guesses": r, "correct": v, "grid_size": len(grid),
              "two_sided": two_sided}
    return EpsilonLowerBound(eps, delta, confidence, "one-run", True, ASSUMPTION, m, detail)


def one_run_test(
    in_scores: Any, out_scores: Any, *, epsilon: float, delta: float, two_sided: bool = True
) -> float:
    """p-value of "the run is (``epsilon``, δ)-DP in each canary" from the scores: the
    smallest ``α`` at which :func:`epsilon_one_run` (default grid, confidence ``1 − α``)
    exceeds ``epsilon`` — ``|K|·min_{k ∈ K} p_k(ε)``, Bonferroni over the grid ``K``."""
    ins, outs, delta, _ = check_audit_inputs(in_scores, out_scores, delta, 0.5)
    m = ins.size + outs.size
    grid = guess_grid(m, two_sided)
    p = min(one_run_p_value(m, *guess_counts(ins, outs, k, two_sided), epsilon, delta)
            for k in grid)
    return min(1.0, len(grid) * p)
