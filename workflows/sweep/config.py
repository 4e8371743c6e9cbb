"""``[sweep]``: mechanisms compared at matched ε or at given noise parameters (``fedpriv sweep``).

Registered into the run's config (:func:`fedpriv.config.register_section`) when imported
(:mod:`workflows.config` imports it). The explicit parameter lists are keyed by each accountable
mechanism's parameter in the registry, so no parameter name is written here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fedpriv.audit.config import MAX_ITERATIONS
from fedpriv.config import Config, register_section
from fedpriv.errors import InputError
from fedpriv.mechanisms.registry import (
    accountable,
    mechanism_class,
    mechanism_names,
    release_class,
)
from fedpriv.schema import (
    MAX_SEED,
    Check,
    Entry,
    bounded_count,
    build_section,
    distinct_positive,
    drop_none,
    field_entries,
    finite,
    one_of,
    positive,
    rule,
    seed_ok,
    type_ok,
)

__all__ = ["SweepConfig", "parameter_list_keys"]


def _subset_of(*choices: str) -> tuple[str, Check]:
    allowed = f"a non-empty list of distinct names from {list(choices)}"
    return allowed, lambda v: bool(v) and len(set(v)) == len(v) and set(v) <= set(choices)


def _baselines() -> list[str]:
    """Registered record-level mechanisms without a formal guarantee (``none``, ``clip``)."""
    return [name for name in mechanism_names()
            if name not in accountable() and mechanism_class(name).level == "record"]


def parameter_list_keys() -> dict[str, str]:
    """``[sweep]`` key of each accountable mechanism's explicit parameter list (its parameter's
    name, plural: ``noise_multipliers``, ``kappas``, ``laplace_scales``) → the mechanism."""
    return {f"{release_class(name).parameter_name}s": name for name in accountable()}


@dataclass(frozen=True)
class SweepConfig:
    """``[sweep]``: mechanisms compared at matched ε or at given noise parameters, over batch
    sizes and seeds (``fedpriv sweep``, :mod:`workflows.sweep`).

    Cells: for every mechanism of ``mechanisms``, one per target ε of ``epsilons`` (the noise
    parameter calibrated with the run's own sampling rate, release count and ``audit.delta``)
    and one per value of its explicit parameter list (``noise_multipliers``, ``kappas``,
    ``laplace_scales``: keys named after each accountable mechanism's parameter in the
    registry, held in :attr:`parameters`), plus one per mechanism of ``baselines`` (no formal
    guarantee); each at every batch size of ``batch_sizes`` (default ``train.batch_size``),
    and each run once per seed of ``seeds`` (default ``seed``). ``epochs``, when set, fixes the
    length of training in passes over the largest client's records instead of
    ``train.local_steps``. ``attack_on`` says which release the server attacks: the round-1
    update of the first ``attack_clients`` clients, or — ``"first-release"`` — the first noisy
    release of training, shown to the server by a one-step probe (:mod:`workflows.sweep.plan`).
    """

    epsilons: list[float] = rule(
        "a list of distinct finite numbers > 0", distinct_positive,
        default_factory=lambda: [1.0, 10.0, 100.0],
        doc="The target epsilons each swept mechanism is calibrated to.",
    )
    mechanisms: list[str] = rule(
        *_subset_of(*accountable()), default_factory=lambda: ["gaussian", "vmf"],
        doc="The mechanisms compared.",
    )
    parameters: dict[str, list[float]] = field(default_factory=dict)
    baselines: list[str] = rule(
        f"a list of distinct names from {_baselines()}",
        lambda v: len(set(v)) == len(v) and set(v) <= set(_baselines()), default_factory=list,
        doc="Mechanisms without a formal guarantee run beside them.",
    )
    batch_sizes: list[int] = rule(
        "a list of distinct integers >= 1 (empty: train.batch_size)", distinct_positive,
        default_factory=list, doc="The batch sizes swept.",
    )
    seeds: list[int] = rule(
        f"a list of distinct integers in [0, {MAX_SEED}] (empty: the top-level seed)",
        lambda v: len(set(v)) == len(v) and all(seed_ok(s) for s in v), default_factory=list,
        doc="The seeds each cell runs with.",
    )
    epochs: float | None = rule(
        "a number > 0: expected passes over the largest client's records in the whole run "
        "(sets train.local_steps per batch size)", positive, default=None,
    )
    attack: str = rule("an attack name (checked against the attack registry)", bool,
                       default="iga", doc="The attack run on every cell.")
    attack_iterations: int = rule(*bounded_count(1, MAX_ITERATIONS), default=2000,
                                  doc="The attack's optimiser iterations.")
    attack_clients: int = rule("an integer >= 1 (at most data.num_clients)", positive, default=1,
                               doc="How many clients' releases are attacked.")
    attack_on: str = rule(*one_of("round-1-update", "first-release"), default="round-1-update",
                          doc="Which release is attacked: the round-1 update, or the first "
                              "noisy release of training (a one-step probe).")

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], prefix: str) -> SweepConfig:
        """Validate a ``[sweep]`` table: the explicit parameter lists by the registry, the rest
        field by field."""
        if not isinstance(raw, Mapping):
            raise InputError(prefix.rstrip("."), raw, "a table")
        rest, parameters = dict(raw), {}
        known = {f.name for f in dataclasses.fields(cls)} - {"parameters"}
        known |= set(parameter_list_keys())
        unknown = sorted(set(rest) - known)
        if unknown:
            raise InputError(f"{prefix}{unknown[0]}", rest[unknown[0]],
                             f"a known key: one of {sorted(known)}")
        for key, mechanism in parameter_list_keys().items():
            if key in rest:
                parameters[mechanism] = _parameter_list(f"{prefix}{key}", rest.pop(key))
        return dataclasses.replace(build_section(cls, rest, prefix), parameters=parameters)

    @classmethod
    def reference(cls, prefix: str) -> list[Entry]:
        """The table's keys for the config reference: the fields, then each accountable
        mechanism's explicit parameter list."""
        lists = [Entry(f"{prefix}{key}", "a list", "unset",
                       "a non-empty list of distinct finite numbers > 0",
                       f"{mechanism}'s cells at these values of its "
                       f"{release_class(mechanism).parameter_name} (no calibration).")
                 for key, mechanism in parameter_list_keys().items()]
        return field_entries(cls, prefix, skip=("parameters",)) + lists

    def to_dict(self) -> dict[str, Any]:
        """The flat table again (explicit lists under their own keys)."""
        out = drop_none(dataclasses.asdict(self))
        out.pop("parameters")
        keys = {mechanism: key for key, mechanism in parameter_list_keys().items()}
        out.update({keys[m]: list(values) for m, values in self.parameters.items()})
        return out

    def check(self) -> None:
        """Every explicit list belongs to a swept mechanism and every swept mechanism has a
        cell (a target ε or a parameter list)."""
        keys = {mechanism: key for key, mechanism in parameter_list_keys().items()}
        for mechanism, values in self.parameters.items():
            if mechanism not in self.mechanisms:
                raise InputError(f"sweep.{keys[mechanism]}", values,
                                 f"unset unless sweep.mechanisms lists {mechanism!r}")
        if not self.epsilons:
            bare = [m for m in self.mechanisms if m not in self.parameters]
            if bare:
                raise InputError("sweep.epsilons", [], f"a non-empty list, or set "
                                 f"sweep.{keys[bare[0]]} for {bare[0]!r}")


def _parameter_list(key: str, value: Any) -> list[float]:
    allowed = "a non-empty list of distinct finite numbers > 0"
    if not (isinstance(value, list) and value and finite(value)
            and all(type_ok(v, float) for v in value) and distinct_positive(value)):
        raise InputError(key, value, allowed)
    return [float(v) for v in value]


def _check(cfg: Config) -> None:
    """The sweep's own rules, and at most ``data.num_clients`` attacked clients."""
    cfg.sweep.check()
    if cfg.sweep.attack_clients > cfg.data.num_clients:
        raise InputError(
            "sweep.attack_clients", cfg.sweep.attack_clients,
            f"an integer in [1, data.num_clients = {cfg.data.num_clients}]",
        )


register_section("sweep", SweepConfig, check=_check)
