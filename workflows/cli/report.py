"""``fedpriv report RUN_DIR [--watch]``: rebuild report.json, tallies.csv, the figures and
report.html from a store; with ``--watch``, again after every round a live run completes."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from fedpriv.audit.summary import attack_lines, ssim_cell
from fedpriv.audit.vacuity import terminal_marks
from fedpriv.validate import check_positive

__all__ = ["register", "render", "run"]


def register(subparsers: Any) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="rebuild a run's report from its audit store (works while the run goes)",
        description="Verify a run's audit store, then write report.json, tallies.csv, "
        "reconstruction grids and the self-contained page report.html from its completed "
        "rounds.",
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
    parser.add_argument(
        "--watch",
        action="store_true",
        help="render again after every newly completed round of a live run; stops when the "
        "run is no longer running, or on Ctrl-C (one line per render on stderr)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds between polls of the store with --watch (default 2)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Write the report; a missing, foreign or corrupt store raises StoreError (exit 2)."""
    interval = check_positive("--interval", args.interval)
    if args.watch:
        return _watch(args, interval)
    from fedpriv.audit.report import report_run

    return report_run(args.run_dir, args.out, hashes=not args.no_hashes)


def _say(report: dict[str, Any], seconds: float) -> dict[str, Any]:
    done = report["completed_rounds"]
    print(
        f"{time.strftime('%H:%M:%S')} round {done[-1] if done else '-'} ({len(done)} "
        f"completed, run {report['status']}): wrote {report['files']['html']} in {seconds:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return report


def _watch(args: argparse.Namespace, interval: float) -> dict[str, Any]:
    """Render after every completed round until the run ends or Ctrl-C; the last report."""
    from fedpriv.audit.watch import watch_reports

    renders = watch_reports(args.run_dir, args.out, interval=interval, hashes=not args.no_hashes)
    last = _say(*next(renders))  # there is always a first render; Ctrl-C in it exits 130
    try:
        for report, seconds in renders:
            last = _say(report, seconds)
    except KeyboardInterrupt:
        pass  # the normal way to stop watching a run that goes on
    return last


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
    marks, footnote = terminal_marks(result["clients"], "log_bayes_capacity")
    for c, mark in zip(result["clients"], marks, strict=True):
        cap = _fmt(c["log_bayes_capacity"], ".4g") + mark
        lines.append(
            f"{c['client_id']:>6} {c['mechanism'] or '-':<10} {c['rounds_participated']:>6} "
            f"{_fmt(c['epsilon'], '10.4g')} {cap:>10} "
            f"{ssim_cell(c, '9.3f'):>9}  {c['guarantee'] or '-'}"
        )
    lines += footnote + attack_lines(result)
    if result["epsilon_bounds"]["note"]:
        lines.append(result["epsilon_bounds"]["note"])
    for problem in result.get("integrity", {}).get("problems", []):
        lines.append(f"{problem['severity']}: {problem['path']}: {problem['message']}")
    files = result["files"]
    lines.append(f"wrote {files['report']}, {files['tallies_csv']}"
                 + (f", {files['html']}" if "html" in files else ""))
    lines += [f"wrote {path}" for path in result["files"]["figures"]]
    return "\n".join(lines)
