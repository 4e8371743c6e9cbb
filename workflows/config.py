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
from fedpriv.schema import bounded_count, rule

__all__ = ["Config", "SimulationConfig", "config_from_dict", "load_config"]

#: The modules that declare the application's sections (imported for their registration).
SECTION_MODULES = (strategies.config, clients.config, workflows.sweep.config)


@dataclass(frozen=True)
class SimulationConfig:
    """``[simulation]``: the Ray backend of Flower's simulation engine."""

    ray_cpus: int = rule(*bounded_count(1, 4096, " (ignored with ray_address)"), default=2)
    client_cpus: float = rule("a number in (0, 4096]", lambda v: 0 < v <= 4096, default=1.0)
    ray_address: str = rule(
        'empty (start a private Ray) or a Ray cluster address such as "auto" or "10.0.0.5:6379"',
        default="",
    )


register_section("simulation", SimulationConfig)
