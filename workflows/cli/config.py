"""``fedpriv config --reference`` and ``fedpriv config --explain KEY``: the config reference.

A thin layer over :mod:`fedpriv.config_reference`; the application's sections are registered by
importing :mod:`workflows.config`, which imports neither torch nor Flower (a light command).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

__all__ = ["register", "render", "run"]


def register(subparsers: Any) -> None:
    """Add the ``config`` parser."""
    p = subparsers.add_parser(
        "config",
        help="the config reference: every key, or one key explained",
        description="Print the config reference generated from the schema (Markdown, as "
        "docs/config.md), or one key's type, default, allowed values and description.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--reference", action="store_true",
                      help="every key, as Markdown (docs/config.md)")
    what.add_argument("--explain", metavar="KEY",
                      help="one key, e.g. strategy.round_timeout or strategy.nodes[0].client")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The reference (``{"markdown": ...}``) or one entry (``{"entry": {...}}``)."""
    import workflows.config  # noqa: F401 - registers the application's sections
    from fedpriv.config_reference import explain, reference_markdown

    if args.reference:
        return {"markdown": reference_markdown()}
    return {"entry": dataclasses.asdict(explain(args.explain))}


def render(result: dict[str, Any]) -> str:
    """The Markdown, or the entry for a terminal."""
    if "markdown" in result:
        return result["markdown"]
    from fedpriv.config_reference import entry_text
    from fedpriv.schema import Entry

    return entry_text(Entry(**result["entry"]))
