"""Calibrate the noise parameter (σ, λ or κ) to a target ε at δ by bisection.

ε is monotone in the parameter: decreasing in σ and λ, increasing in κ (Biswas et al., Thm. 1,
for κ ≥ 1; the subsampling bound, the conversion and approach 1 preserve the order). The search
runs on ``x = log σ``, ``log λ`` or ``−log κ`` (larger ``x`` = more noise): bracket by factors
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
from fedpriv.accounting.events import PARAMETER_KEYS, Release, ReleaseEvent
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


def _parameter(mechanism: str, x: float) -> float:
    return math.exp(-x) if mechanism == "vmf" else math.exp(x)


def _start(mechanism: str, dim: int | None) -> float:
    """σ = 1, λ = 1, or κ = √p / 2 (the VMF that behaves like a Gaussian with σ ≈ 1)."""
    return -math.log(max(1.0, math.sqrt(dim) / 2.0)) if mechanism == "vmf" else 0.0


def calibrate(
    mechanism: str,
    target_epsilon: float,
    *,
    delta: float,
    sample_rate: float,
    steps: int,
    dim: int | None = None,
    accountant: str = "rdp",
    route: str = "best",
    discretization: float | None = None,
    rtol: float = 1e-3,
) -> Calibration:
    """Find the least noise with ε ≤ ``target_epsilon`` for ``steps`` releases at rate ``q``.

    Parameters
    ----------
    mechanism
        ``"gaussian"``, ``"laplace"`` or ``"vmf"``.
    target_epsilon
        Target ε > 0 at ``delta``.
    delta, sample_rate, steps, dim, accountant, route, discretization
        As in :func:`fedpriv.accounting.accountant.epsilon` (``dim`` for VMF).
    rtol
        Relative tolerance on the achieved ε (never above the target).
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise InputError("target_epsilon", target_epsilon, "a finite number > 0")
    if mechanism not in PARAMETER_KEYS:
        raise InputError("mechanism", mechanism, f"one of {', '.join(PARAMETER_KEYS)}")
    key = PARAMETER_KEYS[mechanism]
    calls = 0

    def account(x: float) -> AccountingResult:
        nonlocal calls
        calls += 1
        release = Release.from_params(mechanism, {key: _parameter(mechanism, x)}, dim)
        events = [ReleaseEvent(release, sample_rate, steps)]
        return epsilon(events, delta, accountant=accountant, route=route,
                       discretization=discretization)

    x0, factor = _start(mechanism, dim), _FACTOR
    if accountant == "pld":
        warm = calibrate(mechanism, target_epsilon, delta=delta, sample_rate=sample_rate,
                         steps=steps, dim=dim, route="rdp", rtol=rtol)
        x0 = math.log(warm.parameter) * (-1.0 if mechanism == "vmf" else 1.0)
        factor = _WARM_FACTOR
    safe, x_safe = _bisect(account, x0, target_epsilon, rtol, factor)
    return Calibration(key, _parameter(mechanism, x_safe), safe, calls)


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
