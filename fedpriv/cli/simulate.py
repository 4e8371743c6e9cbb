"""``fedpriv simulate CONFIG [--set KEY=VALUE ...] [--out DIR] [--json]``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

__all__ = ["register", "render", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a private federated training as a Flower simulation (Ray backend)",
        description="Run CONFIG as a Flower simulation on Ray; write DIR/report.json.",
    )
    p.add_argument("config", metavar="CONFIG", help="TOML preset, e.g. configs/quickstart.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set mechanism.noise_multiplier=0.5")
    p.add_argument("--out", metavar="DIR", help="run directory (default runs/<preset>-<time>)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=run)


def default_run_dir(config: str) -> Path:
    """``runs/<preset stem>-<YYYYmmdd-HHMMSS>`` under the working directory."""
    return Path("runs") / f"{Path(config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fedpriv.config import load_config

    cfg = load_config(args.config, args.overrides)
    run_dir = Path(args.out) if args.out else default_run_dir(args.config)
    from strategies.simulation import simulate

    return simulate(cfg, run_dir.resolve(), verbose=args.verbose)


def render(result: dict[str, Any]) -> str:
    """A short human summary of the report."""
    acc = result["accuracy"]
    lines = [
        f"run directory: {result['run_dir']}",
        f"rounds: {result['rounds']}   final accuracy: {acc[-1]:.4f}" if acc else "no rounds",
        f"wall time: {result['wall_seconds']:.1f} s",
        f"{'client':>6} {'mechanism':>9} {'rounds':>6} {'epsilon':>9} {'log C':>9} {'SSIM':>6}",
    ]
    for c in result["clients"]:
        eps, cap, ssim = c["epsilon"], c["log_bayes_capacity"], (c["attack"] or {}).get("ssim")
        lines.append(
            f"{c['client_id']:>6} {c['mechanism']:>9} {c['rounds_participated']:>6} "
            f"{_num(eps):>9} {_num(cap):>9} {_num(ssim):>6}"
        )
    if result.get("failures"):
        lines.append(f"failed or rejected replies: {len(result['failures'])}")
    return "\n".join(lines)


def _num(x: Any) -> str:
    return "-" if x is None else (x if isinstance(x, str) else f"{x:.3g}")
