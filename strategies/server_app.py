"""The Flower ServerApp (``flwr run .``): audited FedAvg configured by a fedpriv preset.

Its log is one line per event: fedpriv's loggers print once (not also through the root
logger), and the run's config — which travels in every train message — is named, not printed,
in Flower's start-up summary. It starts with the run directory (run config ``out``) and ends
with the summary ``fedpriv simulate`` prints (:func:`fedpriv.audit.summary.summary_lines`);
a preset that cannot run on the federation (:class:`~fedpriv.errors.InputError`) is refused
in one line, where Flower would print the exception's traceback, and the run ends failed.
(dp-accounting's warnings print once per process, and without doubling every other line:
:mod:`fedpriv.accounting.dp_library`.)
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


class _RefusedInOneLine(logging.Filter):
    """Flower logs an exception the ServerApp raises with its traceback ("ServerApp raised an
    exception", "Simulation raised an exception"); a refused config is one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, InputError):
            record.msg, record.args, record.exc_info = "fedpriv refused the run: %s", (exc,), None
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
    for kind in (_ConfigNamed, _RefusedInOneLine):
        if not any(isinstance(f, kind) for f in flwr.filters):
            flwr.addFilter(kind())


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Read the run config, fit it to a simulated federation's size
    (:func:`~strategies.federation_size.fit_to_federation`), run the federation, write
    ``report.json`` into the run directory; log where the results go at the start and the
    summary ``fedpriv simulate`` prints (:func:`fedpriv.audit.summary.summary_lines`) at the
    end. A config the federation cannot run raises :class:`~fedpriv.errors.InputError`, which
    Flower's log shows in one line (:class:`_RefusedInOneLine`) and which fails the run."""
    _quiet_logs("fedpriv", "strategies", "attacks")
    log = logging.getLogger(__name__)
    cfg, run_dir = resolve_run_config(context.run_config)
    cfg = fit_to_federation(grid, cfg)
    log.info("fedpriv run directory: %s (report.json, report.html; set it with -c "
             "\"out='/abs/path'\")", run_dir)
    report = run_federation(grid, cfg, run_dir)
    log.info("fedpriv run summary:")
    for line in summary_lines(report):
        log.info("%s", line)
