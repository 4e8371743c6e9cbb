"""Run a fedpriv config as a Flower simulation on the Ray backend.

``flwr.simulation.run_simulation`` is deprecated in Flower 1.41 in favour of ``flwr run``
against a simulation SuperLink, but it is the only in-process route that lets a command-line
tool pass a validated config object and get the report back without a detached SuperLink; it
is kept behind :func:`simulate` so that changing route later touches one function.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from fedpriv.config import Config

__all__ = ["simulate"]

FLOWER_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "RAY_DEDUP_LOGS": "0",
}


def _backend_config(cfg: Config) -> dict[str, Any]:
    return {
        "client_resources": {"num_cpus": cfg.simulation.client_cpus, "num_gpus": 0.0},
        "init_args": {
            "num_cpus": cfg.simulation.ray_cpus,
            "num_gpus": 0,
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "log_to_driver": False,
        },
    }


def simulate(cfg: Config, run_dir: Path, verbose: bool = False) -> dict[str, Any]:
    """Run the federation of ``cfg`` with ``cfg.data.num_clients`` virtual SuperNodes.

    Returns the report (also written to ``run_dir/report.json``).
    """
    for key, value in FLOWER_ENV.items():
        os.environ.setdefault(key, value)
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from clients.client_app import app as client_app
    from strategies.federation import run_federation

    if not verbose:
        logging.getLogger("flwr").setLevel(logging.WARNING)
    result: dict[str, Any] = {}
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        result.update(run_federation(grid, cfg, run_dir))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=cfg.data.num_clients,
            backend_name="ray",
            backend_config=_backend_config(cfg),
            verbose_logging=verbose,
        )
    if not result:
        raise RuntimeError("the simulation ended without a report (see the log above)")
    return result
