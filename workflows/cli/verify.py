"""``fedpriv verify RUN_DIR [--head H | --public-key PUB] [--json]``: is a run's audit record
intact? (:func:`fedpriv.commands.verify.verify_run`). Exit 0 intact, 1 broken (the first
break named), 2 bad input."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["exit_code", "register", "render", "run"]


def register(subparsers: Any) -> None:
    """Add the ``verify`` subcommand."""
    p = subparsers.add_parser(
        "verify",
        help="check a run's audit record: its hash chain and every tensor file",
        description="Recompute the audit record's hash chain and every tensor file's SHA-256; "
        "exit 0 when intact, 1 when not (naming the first broken record), 2 for bad input. "
        "With --head or --public-key, also check the head kept outside the run directory.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run directory (holds audit.sqlite)")
    anchor = p.add_mutually_exclusive_group()
    anchor.add_argument("--head", metavar="H",
                        help="a head printed by the run (64 hex digits): the chain must pass "
                        "through it")
    anchor.add_argument("--public-key", metavar="PUB",
                        help="the PEM Ed25519 public key of simulate --sign-key: the run's "
                        "signed head must verify and be the recomputed one")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Check the record."""
    from fedpriv.commands.verify import verify_run

    return verify_run(args.run_dir, head=args.head, public_key=args.public_key)


def exit_code(result: dict[str, Any]) -> int:
    """0 for an intact record, 1 for a broken one."""
    return 0 if result["intact"] else 1


def render(result: dict[str, Any]) -> str:
    """The verdict first (the first break, when broken), then every finding."""
    if result["intact"]:
        lines = [f"intact: {result['entries']} chain entries, head {result['head']}"]
    else:
        lines = [f"BROKEN: {result['first']}"]
    anchor = result["anchor"]
    if anchor is not None:
        lines.append(f"the head kept outside the run is chain entry {anchor['seq']}; "
                     f"{anchor['entries_after']} entries written after it")
    lines += [f"{p['severity']}: {p['kind']}: {p['message']}" for p in result["problems"]]
    return "\n".join(lines)
