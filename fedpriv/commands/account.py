"""The library function behind ``fedpriv account``: validate the flags, account, return JSON.

Every bad input raises :class:`~fedpriv.errors.InputError` naming the command-line flag,
before any work starts. The mechanism is looked up in the registry
(:func:`fedpriv.mechanisms.release_class`); its release class says which noise parameter it
takes (``--noise-multiplier``, ``--laplace-scale``, ``--kappa``: the parameter's name with
dashes). The default accountant is the run's (:data:`fedpriv.audit.config.DEFAULT_ACCOUNTANT`,
``audit.accountant``: ``tightest``, the least of every valid route), so a noise calibrated here
gives the run the ε asked for. Sampling is as the code draws it (privacy-math.md §14):
``--sampling poisson`` at ``--sample-rate q``, or ``--sampling fixed-size`` with
``--population N --sample-size m``; ``--neighbouring`` names the relation.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fedpriv.accounting.accountant import ACCOUNTANTS, ROUTES, AccountingResult, epsilon
from fedpriv.accounting.calibrate import calibrate
from fedpriv.accounting.events import NEIGHBOURING_RELATIONS, POPULATION_MAX, Release, ReleaseEvent
from fedpriv.audit.config import DEFAULT_ACCOUNTANT, DEFAULT_DELTA
from fedpriv.commands.flags import flag
from fedpriv.errors import InputError
from fedpriv.mechanisms.registry import release_class
from fedpriv.validate import check_dim, check_positive

__all__ = ["COMPOSE", "SAMPLINGS", "UNIT", "account", "flag"]

log = logging.getLogger(__name__)

COMPOSE = ("per-step", "per-epoch")
SAMPLINGS = ("poisson", "fixed-size")
UNIT = "record-level (one training example of one client)"

PER_EPOCH_WARNING = (
    "per-epoch composition (T = epochs) is a compatibility switch: it counts one release per "
    "epoch although every step releases a noisy update, so it UNDERSTATES epsilon"
)


def _fail(key: str, value: Any, allowed: str) -> InputError:
    return InputError(flag(key), value, allowed)


def _noise(own: str, given: dict[str, Any], target: Any) -> float | None:
    """The mechanism's own noise parameter, or None when calibrating; others are rejected."""
    for key, value in given.items():
        if key != own and value is not None:
            raise _fail(key, value, f"not set: it is not a parameter of this mechanism "
                        f"(use {flag(own)})")
    if given.get(own) is not None and target is not None:
        raise _fail("target_epsilon", target, f"omitted when {flag(own)} is given "
                    "(--target-epsilon calibrates it)")
    if given.get(own) is None and target is None:
        raise _fail(own, None, "a number > 0 (or --target-epsilon to calibrate it)")
    return None if given.get(own) is None else check_positive(flag(own), given[own])


def _releases(compose: str, sample_rate: float, steps: Any, epochs: Any) -> int:
    """Number of releases T from ``--steps`` or ``--epochs`` under the composition unit."""
    if (steps is None) == (epochs is None):
        raise _fail("steps", steps, "exactly one of --steps T or --epochs E")
    if compose == "per-epoch":
        if epochs is None:
            raise InputError("--compose", compose, "per-step, or per-epoch with --epochs E")
        return check_dim("--epochs", epochs)
    if steps is not None:
        return check_dim("--steps", steps)
    return math.ceil(round(check_positive("--epochs", epochs) / sample_rate, 9))


def _choices(
    release_type: type[Release], compose: str, accountant: str | None, route: str | None
) -> tuple[str, str]:
    if compose not in COMPOSE:
        raise InputError("--compose", compose, f"one of {', '.join(COMPOSE)}")
    accountant = accountant or DEFAULT_ACCOUNTANT
    if accountant not in ACCOUNTANTS:
        raise _fail("accountant", accountant, f"one of {', '.join(ACCOUNTANTS)}")
    if accountant == "pld" and route is not None:
        raise _fail("route", route, "omitted with --accountant pld (routes are RDP routes)")
    if route is not None and route not in ROUTES:
        raise _fail("route", route, f"one of {', '.join(ROUTES)}")
    return accountant, route or "best"


def _sampling(
    sampling: Any, sample_rate: Any, population: Any, sample_size: Any
) -> tuple[float, int | None]:
    """``(q, N)`` from the sampling flags: Poisson at ``--sample-rate``, or a fixed-size sample
    of ``--sample-size m`` of ``--population N`` (``q = m/N``, N returned)."""
    if sampling not in SAMPLINGS:
        raise InputError("--sampling", sampling, f"one of {', '.join(SAMPLINGS)}")
    if sampling == "poisson":
        for key, value in (("population", population), ("sample_size", sample_size)):
            if value is not None:
                raise _fail(key, value, "omitted with --sampling poisson (it takes --sample-rate)")
        q = check_positive("--sample-rate", sample_rate)
        if q > 1.0:
            raise _fail("sample_rate", sample_rate, "a sampling rate in (0, 1]")
        return q, None
    if sample_rate is not None:
        raise _fail("sample_rate", sample_rate, "omitted with --sampling fixed-size (q = m/N "
                    "from --sample-size and --population)")
    n = check_dim("--population", population, maximum=POPULATION_MAX)
    m = check_dim("--sample-size", sample_size, maximum=POPULATION_MAX)
    if m > n:
        raise _fail("sample_size", sample_size, f"at most --population ({n})")
    return m / n, n


def account(
    mechanism: str,
    *,
    sample_rate: Any = None,
    delta: Any = DEFAULT_DELTA,
    steps: Any = None,
    epochs: Any = None,
    dim: Any = None,
    layer_dims: Any = None,
    compose: str = "per-step",
    accountant: str | None = None,
    route: str | None = None,
    target_epsilon: Any = None,
    sampling: str = "poisson",
    population: Any = None,
    sample_size: Any = None,
    neighbouring: str = "add-remove",
    **noise: Any,
) -> dict[str, Any]:
    """ε at δ of ``T`` sampled releases, or the noise calibrated to a target ε.

    Arguments mirror the flags of ``fedpriv account`` (docs/accounting.md); ``noise`` holds the
    noise parameters given by name (``noise_multiplier=1.1``; exactly the mechanism's own, unless
    calibrating). Returns the JSON object: ``epsilon``, ``delta``, ``accountant``, ``route``,
    ``optimal_order``, the noise parameter, ``steps``, ``sample_rate``, ``sampling`` (with
    ``population`` and ``sample_size`` for a fixed-size sample), ``compose``, ``neighbouring``,
    ``unit``, ``warnings`` and details.
    """
    release_type = release_class(mechanism, "--mechanism")
    accountant, route = _choices(release_type, compose, accountant, route)
    own = release_type.parameter_name
    value = _noise(own, noise, target_epsilon)
    q, n = _sampling(sampling, sample_rate, population, sample_size)
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise _fail("neighbouring", neighbouring, f"one of {', '.join(NEIGHBOURING_RELATIONS)}")
    d = check_positive("--delta", delta)
    if d >= 1.0:
        raise _fail("delta", delta, "a number in (0, 1)")
    dims = None if dim is None else check_dim("--dim", dim)
    target = None if target_epsilon is None else check_positive("--target-epsilon",
                                                                 target_epsilon)
    steps_t = _releases(compose, q, steps, epochs)
    if layer_dims is not None:  # the multi-variate VMF (fedpriv/mechanisms/vmf.py)
        template, dims = _layers_template(mechanism, layer_dims, dims)
    else:
        try:
            template = release_type.calibration_start(dims)
        except InputError as exc:
            raise _fail("dim", dim, f"{exc.allowed} for {mechanism} (the number of model "
                        "parameters)") from None
    setting = dict(mechanism=mechanism, parameter=own, sample_rate=q, steps=steps_t, dim=dims,
                   delta=d, layer_dims=None if layer_dims is None else str(layer_dims),
                   population=n, neighbouring=neighbouring)
    try:
        result, value, calls = _compute(template, setting, value, target, accountant, route)
    except InputError as exc:  # a limit found while computing (e.g. PLD size): name the flag
        raise _fail(exc.key, exc.value, exc.allowed) from exc
    return _report(setting, result, value, target, calls, compose, epochs)


def _layers_template(mechanism: str, layer_dims: Any, dim: int | None
                     ) -> tuple[Release, int]:
    """``--layer-dims``: a per-layer VMF release with a common κ, and its dimension."""
    from fedpriv.mechanisms.vmf import VMFLayersRelease

    allowed = "the model's parameter sizes (integers >= 2, comma-separated), with --mechanism vmf"
    if mechanism != "vmf":
        raise _fail("layer_dims", layer_dims, allowed)
    try:
        sizes = [int(v) for v in str(layer_dims).split(",")]
    except ValueError:
        raise _fail("layer_dims", layer_dims, allowed) from None
    if min(sizes) < 2:
        raise _fail("layer_dims", layer_dims, allowed)
    if dim is not None and dim != sum(sizes):
        raise _fail("dim", dim, f"omitted, or the sum of --layer-dims ({sum(sizes)})")
    return VMFLayersRelease.for_layers(sizes), sum(sizes)


def _compute(template: Release, setting: dict[str, Any], value: float | None,
             target: float | None, accountant: str, route: str
             ) -> tuple[AccountingResult, float, int]:
    q, steps, delta, n, relation = (setting[k] for k in ("sample_rate", "steps", "delta",
                                                          "population", "neighbouring"))
    if target is not None:
        cal = calibrate(template, target, delta=delta, sample_rate=q, steps=steps,
                        accountant=accountant, route=route, population=n,
                        neighbouring=relation)
        return cal.result, cal.parameter, cal.evaluations
    events = [ReleaseEvent(template.with_parameter(value), q, steps, n)]
    return (epsilon(events, delta, accountant=accountant, route=route, neighbouring=relation),
            value, 0)


def _report(setting: dict[str, Any], result: AccountingResult, value: float,
            target: float | None, calls: int, compose: str, epochs: Any) -> dict[str, Any]:
    warnings = list(result.warnings)
    if compose == "per-epoch":
        warnings.insert(0, PER_EPOCH_WARNING)
    for line in warnings:
        log.warning("%s", line)
    out = {
        "mechanism": setting["mechanism"], setting["parameter"]: value,
        "dim": setting["dim"], **({"layer_dims": setting["layer_dims"]}
                                  if setting["layer_dims"] else {}),
        "epsilon": result.epsilon, "delta": result.delta,
        "accountant": result.accountant, "route": result.route,
        "optimal_order": result.optimal_order, "routes": dict(result.routes),
        "steps": setting["steps"], "epochs": epochs, "sample_rate": setting["sample_rate"],
        "sampling": result.sampling, "population": setting["population"],
        "sample_size": None if setting["population"] is None else round(
            setting["sample_rate"] * setting["population"]),
        "compose": compose, "neighbouring": result.neighbouring, "unit": UNIT,
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
