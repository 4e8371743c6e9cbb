"""The Flower ServerApp (``flwr run .``): audited FedAvg configured by a fedpriv preset.

Its log is one line per event: fedpriv's loggers print once (not also through the root
logger), and the run's config — which travels in every train message — is named, not printed,
in Flower's start-up summary. (dp-accounting's warnings print once per process, and without
doubling every other line: :mod:`fedpriv.accounting.dp_library`.)
"""

from __future__ import annotations

import logging

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedpriv.audit.summary import summary_lines
from fedpriv.errors import InputError
from fedpriv.protocol import CONFIG_KEY
from strategies.federation_size import fit_to_federation
from strategies.run_config import resolve_run_config
from strategies.server_run import run_federation

__all__ = ["app"]

app = ServerApp()


class _ConfigNamed(logging.Filter):
    """Flower's start-up summary prints every ConfigRecord it sends; the run's config is in
    ``report.json``, so name it there instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "ConfigRecord (" in str(record.msg) and CONFIG_KEY in str(record.args):
            record.args = (f"{{'{CONFIG_KEY}': the run's config, kept in report.json}}",)
        return True


def _quiet_logs(*packages: str) -> None:
    """INFO logs of our packages on stderr (which ``flwr run --stream`` shows), not through the
    root logger: Flower's own handler is there too, and every line would print twice."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    for name in packages:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not logger.handlers:
            logger.addHandler(handler)
        logger.propagate = False
    flwr = logging.getLogger("flwr")
    if not any(isinstance(f, _ConfigNamed) for f in flwr.filters):
        flwr.addFilter(_ConfigNamed())


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Read the run config, fit it to a simulated federation's size
    (:func:`~strategies.federation_size.fit_to_federation`), run the federation, write
    ``report.json`` into the run directory; log where the results go at the start and the
    summary ``fedpriv simulate`` prints (:func:`fedpriv.audit.summary.summary_lines`) at the
    end. A config the federation cannot run is one line, ``fedpriv: error: ...``: Flower then
    fails the run with that message (its exit code and ``flwr ls`` say so)."""
    _quiet_logs("fedpriv", "strategies", "attacks")
    log = logging.getLogger(__name__)
    try:
        cfg, run_dir = resolve_run_config(context.run_config)
        cfg = fit_to_federation(grid, cfg)
    except InputError as exc:
        log.error("fedpriv: error: %s", exc)
        raise RuntimeError(f"fedpriv: error: {exc}") from None
    log.info("fedpriv run directory: %s (report.json, report.html; set it with -c "
             "\"out='/abs/path'\")", run_dir)
    report = run_federation(grid, cfg, run_dir)
    for line in summary_lines(report):
        log.info("%s", line)
