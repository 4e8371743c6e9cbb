"""``fedpriv``'s subcommand table: every entry of ``SUBCOMMANDS`` becomes a command, and one
that does not import fails loudly instead of silently dropping its command."""

from __future__ import annotations

import importlib

import pytest

cli = importlib.import_module("workflows.cli.main")  # the package re-exports main(), the function


def test_every_subcommand_is_registered() -> None:
    parser = cli.build_parser()
    for name in cli.SUBCOMMANDS:
        with pytest.raises(SystemExit) as done:
            parser.parse_args([name, "--help"])
        assert done.value.code == 0


def test_a_misspelt_subcommand_module_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.SUBCOMMANDS, "account", "acount")
    with pytest.raises(ModuleNotFoundError, match=r"workflows\.cli\.acount"):
        cli.build_parser()
