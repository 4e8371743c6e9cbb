"""Calling the command line in process, as the CLI tests do."""

from __future__ import annotations

import json

import pytest

from workflows.cli.main import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    """``fedpriv ARGV`` in this process: the exit code, the parsed ``--json`` object (when the
    command succeeded and asked for it) and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors exit 2 from inside parse_args
        code = int(exc.code)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 and "--json" in argv else None), err
