"""The run's configuration as the application assembles it: the library's sections
(:mod:`fedpriv.config`) plus every application section, registered by importing the modules
that declare them — ``[strategy]`` (:mod:`strategies.config`), ``[[adversary]]``
(:mod:`clients.config`), ``[sweep]`` (:mod:`workflows.sweep.config`) and ``[simulation]``
(here: the Ray backend of the simulation this layer runs). Every command that reads a config
loads it through this module, so every section is validated before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import clients.config
import strategies.config
import workflows.sweep.config
from fedpriv.config import Config, config_from_dict, load_config, register_section
from fedpriv.errors import InputError
from fedpriv.schema import bounded_count, rule

__all__ = ["Config", "SimulationConfig", "check_simulation", "config_from_dict", "load_config"]

#: The modules that declare the application's sections (imported for their registration).
SECTION_MODULES = (strategies.config, clients.config, workflows.sweep.config)


@dataclass(frozen=True)
class SimulationConfig:
    """``[simulation]``: the Ray backend of Flower's simulation engine."""

    ray_cpus: int = rule(*bounded_count(1, 4096, " (ignored with ray_address)"), default=2,
                         doc="CPUs of the private Ray the simulation starts.")
    client_cpus: float = rule(
        "a number in [0.0001, 4096] (Ray's smallest resource unit is 0.0001), at most ray_cpus "
        "when ray_address is empty", lambda v: 1e-4 <= v <= 4096, default=1.0,
        doc="CPUs each simulated client asks Ray for.",
    )
    ray_address: str = rule(
        'empty (start a private Ray) or a Ray cluster address such as "auto" or "10.0.0.5:6379"',
        default="",
    )


def check_simulation(cfg: Config) -> None:
    """A private Ray (empty ``ray_address``) has ``ray_cpus`` CPUs: a client asking for more
    would never be scheduled, and the run would wait for it until the round timed out. A
    cluster's CPUs are known only once joined: with ``ray_address`` set, the pre-run check
    (:func:`workflows.simulation.check_ray_address`) checks that the cluster answers, not its
    size.

    Raises
    ------
    InputError
        Key ``simulation.client_cpus``.
    """
    sim = cfg.simulation
    if not sim.ray_address and sim.client_cpus > sim.ray_cpus:
        raise InputError("simulation.client_cpus", sim.client_cpus,
                         f"at most simulation.ray_cpus = {sim.ray_cpus} (the private Ray's CPUs; "
                         "a client asking for more is never scheduled)")


register_section("simulation", SimulationConfig, check=check_simulation)
