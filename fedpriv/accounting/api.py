"""The library function behind ``fedpriv account``: validate the flags, account, return JSON.

Every bad input raises :class:`~fedpriv.errors.InputError` naming the command-line flag,
before any work starts. Defaults: the PLD accountant for the Gaussian (tight, through
dp-accounting); the RDP accountant with route ``best`` for Laplace and VMF (fast, and the only
one with a reported optimal order; ``--accountant pld`` gives the tight number on request).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fedpriv.accounting.accountant import ACCOUNTANTS, ROUTES, AccountingResult, epsilon
from fedpriv.accounting.calibrate import calibrate
from fedpriv.accounting.events import NEIGHBOURING_RELATION, PARAMETER_KEYS, Release, ReleaseEvent
from fedpriv.errors import InputError

__all__ = ["COMPOSE", "DEFAULT_ACCOUNTANT", "FLAGS", "UNIT", "account"]

log = logging.getLogger(__name__)

COMPOSE = ("per-step", "per-epoch")
DEFAULT_ACCOUNTANT = {"gaussian": "pld", "laplace": "rdp", "vmf": "rdp"}
UNIT = "record-level (one training example of one client)"
FLAGS = {
    "noise_multiplier": "--noise-multiplier",
    "laplace_scale": "--laplace-scale",
    "kappa": "--kappa",
    "dim": "--dim",
    "sample_rate": "--sample-rate",
    "steps": "--steps",
    "delta": "--delta",
    "accountant": "--accountant",
    "route": "--route",
    "target_epsilon": "--target-epsilon",
    "mechanism": "--mechanism",
}
"""Library input keys → the flags that carry them."""

PER_EPOCH_WARNING = (
    "per-epoch composition (T = epochs) is a compatibility switch: it counts one release per "
    "epoch although every step releases a noisy update, so it UNDERSTATES epsilon"
)


def _fail(key: str, value: Any, allowed: str) -> InputError:
    return InputError(FLAGS.get(key, key), value, allowed)


def _positive(key: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not (math.isfinite(v) and v > 0.0):
        raise _fail(key, value, "a finite number > 0")
    return v


def _whole(key: str, value: Any, minimum: int) -> int:
    try:
        ok = not isinstance(value, bool) and float(value) == int(value) and value >= minimum
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise _fail(key, value, f"an integer >= {minimum}")
    return int(value)


def _noise(mechanism: str, given: dict[str, Any], target: Any) -> float | None:
    """The mechanism's own noise parameter, or None when calibrating; others are rejected."""
    own = PARAMETER_KEYS[mechanism]
    for key, value in given.items():
        if key != own and value is not None:
            raise _fail(key, value, f"not set: it is not a parameter of {mechanism} "
                        f"(use {FLAGS[own]})")
    if given[own] is not None and target is not None:
        raise _fail("target_epsilon", target, f"omitted when {FLAGS[own]} is given "
                    "(--target-epsilon calibrates it)")
    if given[own] is None and target is None:
        raise _fail(own, None, "a number > 0 (or --target-epsilon to calibrate it)")
    return None if given[own] is None else _positive(own, given[own])


def _releases(compose: str, sample_rate: float, steps: Any, epochs: Any) -> int:
    """Number of releases T from ``--steps`` or ``--epochs`` under the composition unit."""
    if (steps is None) == (epochs is None):
        raise _fail("steps", steps, "exactly one of --steps T or --epochs E")
    if compose == "per-epoch":
        if epochs is None:
            raise InputError("--compose", compose, "per-step, or per-epoch with --epochs E")
        return _whole("--epochs", epochs, 1)
    if steps is not None:
        return _whole("steps", steps, 1)
    return math.ceil(round(_positive("--epochs", epochs) / sample_rate, 9))


def _choices(
    mechanism: str, compose: str, accountant: str | None, route: str | None
) -> tuple[str, str]:
    if mechanism not in PARAMETER_KEYS:
        raise _fail("mechanism", mechanism, f"one of {', '.join(PARAMETER_KEYS)}")
    if compose not in COMPOSE:
        raise InputError("--compose", compose, f"one of {', '.join(COMPOSE)}")
    accountant = accountant or DEFAULT_ACCOUNTANT[mechanism]
    if accountant not in ACCOUNTANTS:
        raise _fail("accountant", accountant, f"one of {', '.join(ACCOUNTANTS)}")
    if accountant == "pld" and route is not None:
        raise _fail("route", route, "omitted with --accountant pld (routes are RDP routes)")
    if route is not None and route not in ROUTES:
        raise _fail("route", route, f"one of {', '.join(ROUTES)}")
    return accountant, route or "best"


def account(
    mechanism: str,
    *,
    sample_rate: Any = None,
    delta: Any = None,
    steps: Any = None,
    epochs: Any = None,
    noise_multiplier: Any = None,
    kappa: Any = None,
    laplace_scale: Any = None,
    dim: Any = None,
    compose: str = "per-step",
    accountant: str | None = None,
    route: str | None = None,
    target_epsilon: Any = None,
) -> dict[str, Any]:
    """ε at δ of ``T`` Poisson-sampled releases, or the noise calibrated to a target ε.

    Arguments mirror the flags of ``fedpriv account`` (architecture.md); see the module
    docstring for defaults. Returns the JSON object: ``epsilon``, ``delta``, ``accountant``,
    ``route``, ``optimal_order``, the noise parameter, ``steps``, ``sample_rate``, ``compose``,
    ``neighbouring_relation``, ``unit``, ``warnings`` and details.
    """
    accountant, route = _choices(mechanism, compose, accountant, route)
    given = {"noise_multiplier": noise_multiplier, "laplace_scale": laplace_scale, "kappa": kappa}
    value = _noise(mechanism, given, target_epsilon)
    q = _positive("sample_rate", sample_rate)
    if q > 1.0:
        raise _fail("sample_rate", sample_rate, "a sampling rate in (0, 1]")
    d = _positive("delta", delta)
    if d >= 1.0:
        raise _fail("delta", delta, "a number in (0, 1)")
    dims = None if dim is None else _whole("dim", dim, 1)
    if mechanism == "vmf" and (dims is None or dims < 2):
        raise _fail("dim", dim, "an integer >= 2 for vmf (the number of model parameters)")
    target = None if target_epsilon is None else _positive("target_epsilon", target_epsilon)
    steps_t = _releases(compose, q, steps, epochs)
    setting = dict(mechanism=mechanism, sample_rate=q, steps=steps_t, dim=dims, delta=d)
    try:
        result, value, calls = _compute(setting, value, target, accountant, route)
    except InputError as exc:  # a limit found while computing (e.g. PLD size): name the flag
        raise _fail(exc.key, exc.value, exc.allowed) from exc
    return _report(setting, result, value, target, calls, compose, epochs)


def _compute(setting: dict[str, Any], value: float | None, target: float | None,
             accountant: str, route: str) -> tuple[AccountingResult, float, int]:
    mech, q, steps, dim, delta = (setting[k] for k in
                                  ("mechanism", "sample_rate", "steps", "dim", "delta"))
    if target is not None:
        cal = calibrate(mech, target, delta=delta, sample_rate=q, steps=steps, dim=dim,
                        accountant=accountant, route=route)
        return cal.result, cal.parameter, cal.evaluations
    release = Release(mech, value, dim if mech == "vmf" else None)
    events = [ReleaseEvent(release, q, steps)]
    return epsilon(events, delta, accountant=accountant, route=route), value, 0


def _report(setting: dict[str, Any], result: AccountingResult, value: float,
            target: float | None, calls: int, compose: str, epochs: Any) -> dict[str, Any]:
    warnings = list(result.warnings)
    if compose == "per-epoch":
        warnings.insert(0, PER_EPOCH_WARNING)
    for line in warnings:
        log.warning("%s", line)
    out = {
        "mechanism": setting["mechanism"], PARAMETER_KEYS[setting["mechanism"]]: value,
        "dim": setting["dim"], "epsilon": result.epsilon, "delta": result.delta,
        "accountant": result.accountant, "route": result.route,
        "optimal_order": result.optimal_order, "routes": dict(result.routes),
        "steps": setting["steps"], "epochs": epochs, "sample_rate": setting["sample_rate"],
        "compose": compose, "neighbouring_relation": NEIGHBOURING_RELATION, "unit": UNIT,
        "target_epsilon": target, "calibrated": target is not None,
        "calibration_evaluations": calls, "value_discretization": result.discretization,
        "warnings": warnings,
    }
    if result.approach1 is not None:
        a1 = result.approach1
        out["approach1"] = {"epsilon": a1.epsilon, "delta": a1.delta, "order": a1.order,
                            "epsilon0": a1.epsilon0, "delta0": a1.delta0,
                            "delta_tilde": a1.delta_tilde}
    return out
