"""``fedpriv sweep CONFIG [--set KEY=VALUE ...] [--out DIR] [--json]``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

__all__ = ["register", "render", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="compare mechanisms at matched epsilon: calibrate, train, attack, plot",
        description="For every target epsilon and mechanism of CONFIG's [sweep], calibrate the "
        "noise, run the audited federation, attack round 1, and write results.csv, "
        "results.json, figures and study.md to DIR. Re-run with the same --out to resume.",
    )
    p.add_argument("config", metavar="CONFIG", help="TOML preset, e.g. configs/paper-compare.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set sweep.epsilons=[1,10]")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default runs/sweep-<preset>-<time>); reuse to resume")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fedpriv.config import load_config
    from workflows.sweep import run_sweep
    from workflows.sweep.run import simulate_runner

    cfg = load_config(args.config, args.overrides)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("runs") / f"sweep-{Path(args.config).stem}-{stamp}"
    return run_sweep(cfg, out.resolve(), runner=simulate_runner(verbose=args.verbose))


def render(result: dict[str, Any]) -> str:
    """The result table and where the files are."""
    lines = [f"{'mechanism':>9} {'target ε':>9} {'ε':>9} {'parameter':>22} {'accuracy':>8} "
             f"{'MSE':>7} {'SSIM':>6} {'log C':>9}"]
    for r in result["rows"]:
        param = f"{r['parameter_name']}={_num(r[r['parameter_name']])}"
        lines.append(f"{r['mechanism']:>9} {_num(r['epsilon']):>9} "
                     f"{_num(r['achieved_epsilon']):>9} {param:>22} {_num(r['accuracy']):>8} "
                     f"{_num(r['mse']):>7} {_num(r['ssim']):>6} {_num(r['log_capacity']):>9}")
    lines += [f"study: {result['study']}", f"table: {result['results_csv']}",
              f"figures: {', '.join(Path(f).name for f in result['figures'])} in "
              f"{result['out_dir']}", f"wall time: {result['wall_seconds']:.1f} s"]
    return "\n".join(lines)


def _num(x: Any) -> str:
    return "-" if x is None else (x if isinstance(x, str) else f"{x:.4g}")
