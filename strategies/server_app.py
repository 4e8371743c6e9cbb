"""The Flower ServerApp (``flwr run .``): audited FedAvg configured by a fedpriv preset."""

from __future__ import annotations

import logging

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from strategies.federation import run_federation
from strategies.run_config import resolve_run_config

__all__ = ["app"]

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Read the run config, run the federation, write ``report.json`` into the run directory."""
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per SuperLink request
    cfg, run_dir = resolve_run_config(context.run_config)
    logging.getLogger(__name__).info("fedpriv run directory: %s", run_dir)
    run_federation(grid, cfg, run_dir)
