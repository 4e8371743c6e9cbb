"""``fedpriv sweep CONFIG [--set KEY=VALUE ...] [--out DIR] [--json]``."""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path
from typing import Any

__all__ = ["register", "render", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="compare mechanisms at matched epsilon: calibrate, train, attack, plot",
        description="For every cell of CONFIG's [sweep] (mechanism and target epsilon or "
        "noise parameter, batch size) and every seed, account the noise, run the audited "
        "federation, attack the first release or round-1 update, and write results.csv (mean "
        "and 95% interval over seeds), runs.csv, results.json, figures and study.md to DIR. "
        "Re-run with the same --out to resume.",
    )
    p.add_argument("config", metavar="CONFIG", help="TOML preset, e.g. configs/paper-compare.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set sweep.epsilons=[1,10]")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default runs/sweep-<preset>-<time>); reuse to resume")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="sweep processes sharing --out, each running one run at a time "
                        "(default 1; at most the free cores: a run uses about one)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fedpriv.validate import check_int_range
    from workflows.config import load_config
    from workflows.interrupts import Interrupted
    from workflows.sweep import run_sweep
    from workflows.sweep.run import simulate_runner
    from workflows.sweep.workers import spawn_workers

    cfg = load_config(args.config, args.overrides)
    check_int_range("--workers", args.workers, 1, 64)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("runs") / f"sweep-{Path(args.config).stem}-{stamp}"

    def workers(out_dir: Path) -> Any:  # a ProcessGroup
        return spawn_workers(args.config, args.overrides, out_dir, args.workers - 1)

    try:
        return run_sweep(cfg, out.resolve(), runner=simulate_runner(verbose=args.verbose),
                         workers=workers if args.workers > 1 else None)
    except KeyboardInterrupt:  # finished runs are kept: the same command resumes the sweep
        sets = "".join(f" --set {shlex.quote(item)}" for item in args.overrides)
        raise Interrupted(f"fedpriv sweep {shlex.quote(args.config)}{sets} "
                          f"--out {shlex.quote(str(out))}") from None


def render(result: dict[str, Any]) -> str:
    """The result table and where the files are."""
    lines = [f"{'mechanism':>9} {'L':>4} {'parameter':>22} {'ε/step':>9} {'ε/epoch*':>9} "
             f"{'accuracy':>15} {'MSE':>15} {'SSIM':>13} {'log C':>9}"]
    for r in result["rows"]:
        name = r["parameter_name"]
        param = "-" if name is None else f"{name}={_num(r[name])}"
        lines.append(f"{r['mechanism']:>9} {r['batch_size']:>4} {param:>22} "
                     f"{_num(r['achieved_epsilon']):>9} {_num(r['epsilon_per_epoch']):>9} "
                     f"{_ci(r, 'accuracy'):>15} {_ci(r, 'mse'):>15} {_ci(r, 'ssim'):>13} "
                     f"{_num(r['log_capacity']):>9}")
    lines.append("(* per-epoch composition: a compatibility figure that understates epsilon; "
                 "± is a 95% interval over seeds)")
    lines += [f"study: {result['study']}", f"table: {result['results_csv']}",
              f"runs: {result['runs_csv']}",
              f"figures: {', '.join(Path(f).name for f in result['figures'])} in "
              f"{result['out_dir']}", f"wall time: {result['wall_seconds']:.1f} s"]
    return "\n".join(lines)


def _num(x: Any) -> str:
    return "-" if x is None else (x if isinstance(x, str) else f"{x:.4g}")


def _ci(row: dict[str, Any], key: str) -> str:
    half = row.get(f"{key}_ci")
    return _num(row[key]) + ("" if half is None else f"±{half:.2g}")
