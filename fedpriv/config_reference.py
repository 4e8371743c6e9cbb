"""The config reference, generated from the schema: ``docs/config.md`` and
``fedpriv config --explain KEY``.

Every key comes from the declarations the configs are validated by
(:func:`fedpriv.config.config_entries`: each section's ``rule()`` fields, the mechanisms'
``param()`` declarations, the tables that list their own keys), so the reference cannot name a
key the schema does not take, nor miss one it does. It lists the sections registered in this
process: the application's (``[strategy]``, ``[[adversary]]``, ``[sweep]``, ``[simulation]``)
once :mod:`workflows.config` is imported.
"""

from __future__ import annotations

import difflib
import re

from fedpriv.config import config_entries
from fedpriv.errors import InputError
from fedpriv.schema import Entry

__all__ = ["REGENERATE", "entry_text", "explain", "reference_markdown", "table_of"]

#: The command that writes ``docs/config.md``.
REGENERATE = "python -m fedpriv config --reference > docs/config.md"

_HEADER = f"""# Configuration reference

Generated from the schema — each section's `rule()` declarations (`fedpriv/schema.py`) and the
mechanisms' `param()` declarations — by

    {REGENERATE}

Do not edit it by hand: `tests/test_config_reference.py` fails when it is out of date.
`fedpriv config --explain KEY` prints one entry.

A key is a TOML key of a preset (`configs/*.toml`), of `fedpriv simulate --set KEY=VALUE` and of
Flower run config (`flwr run . -c '"train.lr"=0.1'`). `[i]` marks an element of an array of
tables (`[[strategy.nodes]]`); errors name it by its index (`strategy.nodes[0].client`). A key
left out takes its default; `unset` means none (derived, or not used). Cross-key rules (client
ids against `data.num_clients`, canaries against the optimiser, ...) are checked too, before any
work starts."""


def table_of(key: str) -> str:
    """The TOML table a key lives in: ``[audit.canaries]``, ``[[strategy.nodes]]``, or
    ``top level``."""
    head = key.rpartition(".")[0]
    if not head:
        return "top level"
    return f"[[{head.removesuffix('[i]')}]]" if head.endswith("[i]") else f"[{head}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def reference_markdown() -> str:
    """``docs/config.md``: every key of :func:`~fedpriv.config.config_entries`, one table per
    TOML table, with its type, default, what is allowed and what it does."""
    tables: dict[str, list[Entry]] = {}
    for entry in config_entries():
        tables.setdefault(table_of(entry.key), []).append(entry)
    parts = [_HEADER]
    for table, entries in tables.items():
        rows = [f"| `{e.key}` | {e.type} | `{e.default}` | {_cell(e.allowed)} | {_cell(e.doc)} |"
                for e in entries]
        parts.append("\n".join([f"## {table.capitalize() if table == 'top level' else table}",
                                "", "| Key | Type | Default | Allowed | Description |",
                                "|---|---|---|---|---|", *rows]))
    return "\n\n".join(parts)


def _canonical(key: str) -> str:
    """``key`` with any index written ``[i]``; an override's key as the ``[mechanism]`` key
    it overrides (``mechanism.overrides[2].kappa`` → ``mechanism.kappa``)."""
    key = re.sub(r"\[[^\]]*\]", "[i]", key.strip())
    override = re.fullmatch(r"mechanism\.overrides(?:\[i\])?\.(\w+)", key)
    if override and override.group(1) != "clients":
        return f"mechanism.{override.group(1)}"
    return key


def explain(key: str) -> Entry:
    """The entry of ``key`` (its index, if any, written as a number, ``[i]`` or left out).

    Raises
    ------
    InputError
        Naming ``KEY``, for a key the schema does not take, with the closest known keys.
    """
    entries = config_entries()
    wanted = _canonical(key)
    for entry in entries:
        if wanted in (entry.key, entry.key.replace("[i]", "")):
            return entry
    keys = [e.key for e in entries]
    close = difflib.get_close_matches(wanted, keys, n=3, cutoff=0.6)
    hint = f"close matches: {', '.join(close)}" if close else "none is close"
    raise InputError("KEY", key, f"a config key ({hint}; fedpriv config --reference lists all "
                     f"{len(keys)})")


def entry_text(entry: Entry) -> str:
    """One entry for a terminal: the key and its table, type, default, allowed, description."""
    lines = [f"{entry.key}    (in {table_of(entry.key)})", f"  type:     {entry.type}",
             f"  default:  {entry.default}", f"  allowed:  {entry.allowed}"]
    return "\n".join([*lines, f"  {entry.doc}"] if entry.doc else lines)
