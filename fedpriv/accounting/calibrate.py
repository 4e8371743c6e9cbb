"""Calibrate a release's noise parameter (σ, λ, κ, ...) to a target ε at δ by bisection.

Generic over :class:`~fedpriv.accounting.events.Release` (cf. dp-accounting's
``calibrate_dp_mechanism``, which takes a factory ``parameter -> DpEvent``): the release gives
the starting point (``calibration_start``), the factory (``with_parameter``) and the direction
(``more_noise``). ε is monotone in the parameter: decreasing in σ and λ, increasing in κ
(Biswas et al., Thm. 1, for κ ≥ 1; the subsampling bound, the conversion and approach 1
preserve the order). The search runs on ``x = more_noise · log(parameter)`` (larger ``x`` =
more noise): bracket by factors
of 4 from a starting point, then bisect until the bracket is narrower than ``rtol``. The answer
is always the bracket end whose ε was computed and found ``≤`` target, so calibration never
overshoots; the achieved ε is reported with it. Bisection stops once that ε is within ``rtol``
of the target (relative), or the bracket is narrower than 1e-12 in ``x``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fedpriv.accounting.accountant import AccountingResult, epsilon
from fedpriv.accounting.events import Release, ReleaseEvent
from fedpriv.errors import InputError

__all__ = ["Calibration", "calibrate"]

_LOG_RANGE = (math.log(1e-6), math.log(1e8))  # search range of x
_FACTOR = math.log(4.0)
_WARM_FACTOR = math.log(1.25)
_MIN_WIDTH = 1e-12


@dataclass(frozen=True)
class Calibration:
    """The calibrated parameter and the accounting at that value (``result.epsilon ≤`` target)."""

    parameter_name: str
    parameter: float
    result: AccountingResult
    evaluations: int


def calibrate(
    template: Release,
    target_epsilon: float,
    *,
    delta: float,
    sample_rate: float,
    steps: int,
    accountant: str = "rdp",
    route: str = "best",
    discretization: float | None = None,
    rtol: float = 1e-3,
    population: int | None = None,
    neighbouring: str = "add-remove",
) -> Calibration:
    """Find the least noise with ε ≤ ``target_epsilon`` for ``steps`` releases at rate ``q``.

    Parameters
    ----------
    template
        A release of the mechanism to calibrate; its parameter is the search's starting point
        (e.g. ``VMFRelease.calibration_start(dim)``).
    target_epsilon
        Target ε > 0 at ``delta``.
    delta, sample_rate, steps, accountant, route, discretization, neighbouring
        As in :func:`fedpriv.accounting.accountant.epsilon`.
    population
        ``N`` of a fixed-size sample (:class:`~fedpriv.accounting.events.ReleaseEvent`);
        None: Poisson sampling.
    rtol
        Relative tolerance on the achieved ε (never above the target).
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise InputError("target_epsilon", target_epsilon, "a finite number > 0")
    if template.parameter_name is None:
        raise InputError("mechanism", template.mechanism, "a mechanism with a noise parameter")
    sign = template.more_noise
    calls = 0

    def account(x: float) -> AccountingResult:
        nonlocal calls
        calls += 1
        events = [ReleaseEvent(template.with_parameter(math.exp(sign * x)), sample_rate, steps,
                               population)]
        return epsilon(events, delta, accountant=accountant, route=route,
                       discretization=discretization, neighbouring=neighbouring)

    x0, factor = sign * math.log(template.parameter), _FACTOR
    if accountant != "rdp":  # a PLD is costly: start from the RDP answer, nearby
        warm = calibrate(template, target_epsilon, delta=delta, sample_rate=sample_rate,
                         steps=steps, route="rdp", rtol=rtol, population=population,
                         neighbouring=neighbouring)
        x0, factor = sign * math.log(warm.parameter), _WARM_FACTOR
    safe, x_safe = _bisect(account, x0, target_epsilon, rtol, factor)
    return Calibration(template.parameter_name, math.exp(sign * x_safe), safe, calls)


def _bisect(
    account: Callable[[float], AccountingResult], x0: float, target: float, rtol: float,
    factor: float,
) -> tuple[AccountingResult, float]:
    """Bracket then bisect ``x`` (ε decreasing in ``x``); return the safe end and its result."""
    lo, hi = _LOG_RANGE
    res = account(x0)
    ok = res.epsilon <= target
    safe, unsafe = ((x0, res), None) if ok else (None, x0)
    step = -factor if ok else factor
    x = x0
    while (safe is None or unsafe is None) and lo <= x + step <= hi:
        x += step
        res = account(x)
        if res.epsilon <= target:
            safe = (x, res)
        else:
            unsafe = x
    if safe is None:
        raise InputError("target_epsilon", target, "an epsilon reachable with the noise "
                         "parameter in [1e-6, 1e8] (this one is too small)")
    while (unsafe is not None and abs(safe[0] - unsafe) > _MIN_WIDTH
           and safe[1].epsilon < target * (1.0 - rtol)):
        mid = (safe[0] + unsafe) / 2.0
        res = account(mid)
        if res.epsilon <= target:
            safe = (mid, res)
        else:
            unsafe = mid
    return safe[1], safe[0]
