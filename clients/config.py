"""``[[adversary]]``: clients that misbehave, and how (:mod:`clients.adversaries`).

Registered into the run's config (:func:`fedpriv.config.register_section`) when imported: the
ClientApp validates the tables it receives from the server, and ``fedpriv simulate`` before any
work starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fedpriv.config import Config, register_section
from fedpriv.errors import InputError
from fedpriv.schema import one_of, positive, rule

__all__ = ["ADVERSARY_BEHAVIOURS", "AdversaryConfig", "BehaviourSpec"]


@dataclass(frozen=True)
class BehaviourSpec:
    """What a behaviour's ``factor`` means and allows, and the mechanisms it needs.

    ``default`` None with a ``low``: the factor may be left unset (the behaviour then uses the
    absolute value its description names). ``mechanisms``: the configured mechanisms the
    behaviour works with (None: any).
    """

    allowed: str | None = None  # None: the behaviour takes no factor
    default: float | None = None
    low: float = 0.0
    high: float = math.inf
    not_one: bool = True  # factor 1 would be honest
    integer: bool = False
    mechanisms: tuple[str, ...] | None = None
    target: bool = False  # the behaviour needs ``target`` (a client id)


_ADDITIVE = ("gaussian", "laplace")

#: Adversarial behaviour → what its factor means and allows (docs/trust.md §3).
ADVERSARY_BEHAVIOURS: dict[str, BehaviourSpec] = {
    "under-noise": BehaviourSpec("a number in (0, 1): the fraction of the declared noise "
                                 "scale actually added", 0.25, 0.0, 1.0),
    "weak-under-noise": BehaviourSpec("a number in (0, 1): the fraction of the declared noise "
                                      "added, under multi-step training", 0.3, 0.0, 1.0),
    "no-noise": BehaviourSpec(),
    "false-sample-rate": BehaviourSpec("a number in (0, 1): the declared sampling rate over "
                                       "the true one", 0.1, 0.0, 1.0),
    "scale-update": BehaviourSpec("a finite number > 0, != 1: the factor on the update", 1e6),
    "malformed": BehaviourSpec(),
    "replay": BehaviourSpec(),
    "perturbed-replay": BehaviourSpec("a number in (0, 1): the relative norm of the "
                                      "perturbation added to the replayed update", 0.01, 0.0, 1.0),
    "declare-tiny-sigma": BehaviourSpec("a number in (0, 1): the declared noise scale over the "
                                        "configured one (unset: declares 1e-300)", None, 0.0, 1.0),
    "declare-huge-steps": BehaviourSpec("an integer in [2, 100000]: the local steps declared",
                                        100_000, 2.0, 100_000.0, integer=True),
    "extra-metric": BehaviourSpec(),
    "rename-arrays": BehaviourSpec(),
    "inflate-size": BehaviourSpec("a number > 1: the declared local size over the true one "
                                  "(unset: declares 1e9 examples)", None, 1.0),
    "steal-identity": BehaviourSpec(target=True),
    "declare-lr": BehaviourSpec("a number in (0, 1): the declared learning rate over the true "
                                "one, and the noise actually added over the declared", 0.1,
                                0.0, 1.0, mechanisms=_ADDITIVE),
    "declare-fewer-steps": BehaviourSpec("an integer in [2, 1000]: the true local steps over "
                                         "the declared", 5, 2.0, 1000.0, integer=True),
    "declare-optimizer": BehaviourSpec(),
    "rademacher-noise": BehaviourSpec(mechanisms=_ADDITIVE),
    "uniform-noise": BehaviourSpec(mechanisms=_ADDITIVE),
    "signal-scale": BehaviourSpec("a number > 1: the factor on the clipped sum", 10.0, 1.0,
                                  mechanisms=_ADDITIVE),
    "no-clip": BehaviourSpec(mechanisms=_ADDITIVE),
    "reuse-noise": BehaviourSpec(mechanisms=_ADDITIVE),
    "cancel-noise": BehaviourSpec(mechanisms=_ADDITIVE),
    "hidden-steps": BehaviourSpec("an integer in [2, 1000]: local steps trained per declared "
                                  "step, each at sigma / sqrt(factor)", 5, 2.0, 1000.0,
                                  integer=True, mechanisms=("gaussian",)),
    "cancel-steps": BehaviourSpec(mechanisms=_ADDITIVE),
    "vmf-kappa": BehaviourSpec("a number in (1, 1e6]: the concentration trained with over the "
                               "declared", 2.0, 1.0, 1e6, mechanisms=("vmf",)),
}


@dataclass(frozen=True)
class AdversaryConfig:
    """One ``[[adversary]]`` table: clients that misbehave, and how (``clients/adversaries/``).

    A test of the auditor and of robust strategies, not a threat model of fedpriv's own
    clients: an adversary trains and replies through fedpriv's ClientApp, wrapped in a Flower
    client mod that changes what it trains with or what it says.
    """

    clients: list[int] = rule("a non-empty list of client ids", bool, default_factory=list,
                              doc="The clients that misbehave this way.")
    behaviour: str = rule(*one_of(*ADVERSARY_BEHAVIOURS), default="no-noise",
                          doc="How they misbehave (docs/trust.md §3).")
    factor: float | None = rule("a number > 0 (see the behaviour)", positive, default=None)
    target: int | None = rule("a client id (steal-identity: the partition id claimed)",
                              lambda v: v >= 0, default=None)

    def value(self) -> float | None:
        """The behaviour's factor (its default when unset; None for a behaviour without one,
        or unset where the behaviour's default is an absolute value)."""
        spec = ADVERSARY_BEHAVIOURS[self.behaviour]
        return spec.default if self.factor is None else self.factor


def _check_factor(key: str, adversary: AdversaryConfig) -> None:
    spec = ADVERSARY_BEHAVIOURS[adversary.behaviour]
    if spec.allowed is None:
        if adversary.factor is not None:
            raise InputError(f"{key}.factor", adversary.factor,
                             f"unset: {adversary.behaviour} takes no factor")
        return
    factor = adversary.value()
    if factor is None:
        return
    in_range = (spec.low <= factor <= spec.high) if spec.integer else (
        spec.low < factor < spec.high or factor == spec.high < math.inf)
    if (not math.isfinite(factor) or not in_range or (spec.not_one and factor == 1.0)
            or (spec.integer and not float(factor).is_integer())):
        raise InputError(f"{key}.factor", factor, spec.allowed)


def _check_fit(cfg: Config, key: str, adversary: AdversaryConfig) -> None:
    """The behaviour's mechanism and target fit the run."""
    spec = ADVERSARY_BEHAVIOURS[adversary.behaviour]
    if spec.mechanisms is not None:
        for c in adversary.clients:
            name, _ = cfg.mechanism.for_client(c)
            if name not in spec.mechanisms:
                raise InputError(f"{key}.behaviour", adversary.behaviour,
                                 f"a behaviour for client {c}'s mechanism {name!r} "
                                 f"({adversary.behaviour} needs one of {list(spec.mechanisms)})")
    if spec.target:
        t = adversary.target
        if t is None or isinstance(t, bool) or not 0 <= t < cfg.data.num_clients or \
                t in adversary.clients:
            raise InputError(f"{key}.target", t, f"another client's id in "
                             f"[0, {cfg.data.num_clients - 1}] (the partition id claimed)")
    elif adversary.target is not None:
        raise InputError(f"{key}.target", adversary.target,
                         f"unset: {adversary.behaviour} takes no target")


def check_adversaries(cfg: Config) -> None:
    """Each ``[[adversary]]``: client ids in range, each client in one table at most, the
    behaviour's factor in its range (or unset where the behaviour takes none), its mechanism
    and target fitting the run.

    Raises
    ------
    InputError
        Naming ``adversary[i].clients``, ``.factor``, ``.behaviour`` or ``.target``.
    """
    seen: set[int] = set()
    num_clients = cfg.data.num_clients
    for i, adversary in enumerate(cfg.adversary):
        key = f"adversary[{i}]"
        bad = [c for c in adversary.clients
               if not isinstance(c, int) or not 0 <= c < num_clients or c in seen]
        if bad or not adversary.clients:
            raise InputError(f"{key}.clients", adversary.clients,
                             f"distinct client ids in [0, {num_clients - 1}], each "
                             "in one [[adversary]] table")
        seen.update(adversary.clients)
        _check_factor(key, adversary)
        _check_fit(cfg, key, adversary)


register_section("adversary", AdversaryConfig, many=True, check=check_adversaries)
