"""The Flower ServerApp (``flwr run .``): audited FedAvg configured by a fedpriv preset."""

from __future__ import annotations

import logging

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from strategies.run_config import resolve_run_config
from strategies.server_run import run_federation

__all__ = ["app"]

app = ServerApp()


def _log_to_stderr(*packages: str) -> None:
    """INFO logs of our packages on stderr (which ``flwr run --stream`` shows). Not through
    the root logger: Flower's own handler is there too, and every line would print twice."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    for name in packages:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not logger.handlers:
            logger.addHandler(handler)
        logger.propagate = False


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Read the run config, run the federation, write ``report.json`` into the run directory."""
    _log_to_stderr("fedpriv", "strategies", "attacks")
    cfg, run_dir = resolve_run_config(context.run_config)
    logging.getLogger(__name__).info("fedpriv run directory: %s", run_dir)
    run_federation(grid, cfg, run_dir)
