"""Dispatch ``fedpriv SUBCOMMAND``; map errors to the exit codes of the contract.

Exit 0 on success, 2 on bad input (:class:`fedpriv.errors.InputError`, or an argparse usage
error), 1 on any other failure, 128 + the signal when SIGINT or SIGTERM stopped the command
(:mod:`workflows.interrupts`: the first stops it, a second exits at once). With ``--json``
exactly one JSON object goes to stdout; logs and progress go to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import select
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from fedpriv.errors import InputError
from fedpriv.jsonio import dumps, jsonable

# subcommand name -> module under workflows.cli
SUBCOMMANDS: dict[str, str] = {
    "simulate": "simulate",
    "audit": "audit",
    "report": "report",
    "verify": "verify",
    "account": "account",
    "capacity": "capacity",
    "compare": "compare",
    "robustness": "robustness",
    "config": "config",
    "sweep": "sweep",
    "deploy-local": "deploy_local",
    "flwr-run": "flwr_run",
}

log = logging.getLogger("fedpriv")


def _load(module: str) -> ModuleType:
    """The subcommand's module under ``workflows.cli``. Every subcommand ships with fedpriv
    and needs no optional dependency, so a module that does not import (a typo in
    :data:`SUBCOMMANDS`, a broken install) raises here rather than dropping its command."""
    return importlib.import_module(f"workflows.cli.{module}")


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, like every other exit 2: the error
    and where to find the usage, not the usage itself wrapped over several lines. The
    subcommands' parsers are of this class too (``add_subparsers`` makes them so)."""

    def error(self, message: str) -> NoReturn:
        text = f"{self.prog}: error: {message} (see {self.prog} --help)"
        self.exit(2, " ".join(text.splitlines()) + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand of :data:`SUBCOMMANDS` registered."""
    parser = OneLineParser(
        prog="fedpriv",
        description="Federated learning with private updates, audited by an "
        "honest-but-curious server.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS.values():
        _load(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fedpriv`` console script; returns the exit code."""
    from workflows.interrupts import Interrupted, exit_status, install_handlers

    install_handlers()  # explicitly: a background job starts with SIGINT ignored
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # dp-accounting logs through absl each RDP order it drops for not converging (harmless: the
    # order is excluded from the minimum). fedpriv.accounting.dp_library logs each distinct one
    # once; the command line keeps even that out of the progress output.
    logging.getLogger("absl").setLevel(logging.ERROR)
    # ours at INFO, libraries at WARNING
    for package in ("fedpriv", "strategies", "clients", "attacks"):
        logging.getLogger(package).setLevel(logging.DEBUG if args.verbose else logging.INFO)
    module = _load(SUBCOMMANDS[args.command])
    try:
        result = module.run(args)
    except InputError as exc:
        print(f"fedpriv {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        resume = exc.resume if isinstance(exc, Interrupted) else None
        print(f"fedpriv {args.command}: interrupted"
              + (f"; resume with: {resume}" if resume else ""), file=sys.stderr)
        return exit_status()
    except Exception as exc:  # noqa: BLE001 - the contract maps every other failure to 1
        log.debug("failure", exc_info=True)
        print(f"fedpriv {args.command}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        _emit(dumps(result))
    else:
        render = getattr(module, "render", None)
        _emit(render(result) if render else json.dumps(jsonable(result), indent=2))
    exit_code = getattr(module, "exit_code", None)  # a command whose answer can be "no"
    return exit_code(result) if exit_code else 0


def _emit(text: str) -> None:
    """Write ``text`` and a newline to stdout, all of it, whatever mode its descriptor is in.
    The pipe is one open file shared with every process that inherited it and every thread
    of this one; once anything sets it non-blocking, a write to a full pipe is cut short
    silently, with exit status 0 (seen: a resumed run's ``--json`` object cut at 131,072
    bytes, while Ray and Flower were shutting down). So the bytes go out by ``os.write``,
    waiting for the pipe whenever it is full."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a descriptor (a test's captured stream)
        print(text, file=stream)
        return
    stream.flush()
    data = memoryview(f"{text}\n".encode(stream.encoding or "utf-8", stream.errors or "strict"))
    while data:
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        data = data[written:]
