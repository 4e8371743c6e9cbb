"""``fedpriv report RUN_DIR``: rebuild report.json, tallies.csv and the figures from a store."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "render", "run"]


def register(subparsers: Any) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="rebuild a run's report from its audit store (works while the run goes)",
        description="Verify a run's audit store, then write report.json, tallies.csv and "
        "reconstruction grids from its completed rounds.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory (holds audit.sqlite)")
    parser.add_argument(
        "--out", metavar="DIR", help="write the report files here (default RUN_DIR)"
    )
    parser.add_argument(
        "--no-hashes",
        action="store_true",
        help="check tensor files by size only, not by SHA-256 (faster on big runs)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Write the report; a missing, foreign or corrupt store raises StoreError (exit 2)."""
    from fedpriv.audit.report import report_run

    return report_run(args.run_dir, args.out, hashes=not args.no_hashes)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(result: dict[str, Any]) -> str:
    """A human summary: run status, per-client leakage, integrity and the files written."""
    lines = [
        f"run {result['run_id']} ({result['status']}): {result['rounds']} completed rounds"
        + (f", incomplete {result['incomplete_rounds']}" if result["incomplete_rounds"] else ""),
        f"{'client':>6} {'mechanism':<10} {'rounds':>6} {'epsilon':>10} {'log C':>10} "
        f"{'best SSIM':>9}  guarantee",
    ]
    for c in result["clients"]:
        ssim = c["attack"]["ssim"] if c["attack"] else None
        lines.append(
            f"{c['client_id']:>6} {c['mechanism'] or '-':<10} {c['rounds_participated']:>6} "
            f"{_fmt(c['epsilon'], '10.4g')} {_fmt(c['log_bayes_capacity'], '10.4g')} "
            f"{_fmt(ssim, '9.3f')}  {c['guarantee'] or '-'}"
        )
    for problem in result.get("integrity", {}).get("problems", []):
        lines.append(f"{problem['severity']}: {problem['path']}: {problem['message']}")
    lines.append(f"wrote {result['files']['report']}, {result['files']['tallies_csv']}")
    lines += [f"wrote {path}" for path in result["files"]["figures"]]
    return "\n".join(lines)
