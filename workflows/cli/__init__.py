"""The ``fedpriv`` command line: a thin layer over the library.

Each subcommand lives in its own module of this package and defines

* ``register(subparsers)`` — add its ``argparse`` parser (cheap: no heavy imports);
* ``run(args) -> dict`` — do the work by calling one library function, return the JSON object;
* optionally ``render(result) -> str`` — the human-readable summary printed without ``--json``;
* optionally ``exit_code(result) -> int`` — the exit status of a command whose answer can be
  "no" (``fedpriv verify``: 1 for a broken record); 0 otherwise.

Heavy libraries (torch, flwr, ray) are imported inside ``run`` so that light commands such as
``fedpriv account`` answer quickly.
"""

from workflows.cli.main import main

__all__ = ["main"]
