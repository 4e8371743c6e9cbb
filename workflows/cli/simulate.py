"""``fedpriv simulate CONFIG [--set KEY=VALUE ...] [--out DIR] [--json]`` and
``fedpriv simulate --resume RUN_DIR [--json]``.

Everything is validated before Ray starts and before anything is written: the config
(:func:`workflows.config.load_config`), the flags, the run directory (a new run never writes
into a non-empty directory, and its parent must take new entries), and — in
:func:`workflows.simulation.check_runnable` — the data set, the partition, the model and every
client's mechanism.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from fedpriv.errors import InputError

__all__ = ["register", "render", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a private federated training as a Flower simulation (Ray backend)",
        description="Run CONFIG as a Flower simulation on Ray; write DIR/report.json. "
        "--resume RUN_DIR continues a killed run after its last completed round, with the "
        "same results as an uninterrupted run when train.fraction_train = 1.",
    )
    p.add_argument("config", metavar="CONFIG", nargs="?",
                   help="TOML preset, e.g. configs/quickstart.toml (omit with --resume)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set mechanism.noise_multiplier=0.5")
    p.add_argument("--out", metavar="DIR",
                   help="run directory, new or empty (default runs/<preset>-<time>)")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue this run directory with its stored configuration")
    p.add_argument("--sign-key", metavar="KEY",
                   help="sign the run's final chain head with this Ed25519 private key (PEM, "
                   "kept outside the run directory); check it with fedpriv verify --public-key")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=run)


def default_run_dir(config: str) -> Path:
    """``runs/<preset stem>-<YYYYmmdd-HHMMSS>`` under the working directory."""
    return Path("runs") / f"{Path(config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def _new_run_dir(path: Path) -> Path:
    """``path`` if a new run may write there: absent under a writable directory
    (:func:`fedpriv.validate.check_out_dir`), or an empty directory."""
    from fedpriv.validate import check_out_dir

    check_out_dir("--out", path)
    if path.is_dir() and any(path.iterdir()):
        raise InputError(
            "--out", str(path), "a new or empty directory (continue a killed run with --resume)"
        )
    return path


def _resumed_run_dir(args: argparse.Namespace) -> Path:
    for flag, given in (("CONFIG", args.config), ("--set", args.overrides), ("--out", args.out)):
        if given:
            raise InputError(flag, given, "nothing with --resume (the stored config is used)")
    from fedpriv.audit import DB_NAME

    path = Path(args.resume)
    if not (path / DB_NAME).is_file():
        raise InputError("--resume", str(path), f"a run directory holding {DB_NAME}")
    return path


def run(args: argparse.Namespace) -> dict[str, Any]:
    from workflows.config import load_config

    if args.resume is not None:
        from workflows.simulation import completed_rounds

        run_dir = _resumed_run_dir(args).resolve()
        cfg, _ = completed_rounds(run_dir)
    elif args.config is None:
        raise InputError("CONFIG", None, "a TOML preset, e.g. configs/quickstart.toml "
                         "(or --resume RUN_DIR)")
    else:
        cfg = load_config(args.config, args.overrides)
        run_dir = _new_run_dir(Path(args.out) if args.out else default_run_dir(args.config))
        run_dir = run_dir.resolve()
    sign_key = None
    if args.sign_key is not None:
        from fedpriv.audit.signing import load_private_key

        sign_key = load_private_key(args.sign_key, run_dir)
    from workflows.simulation import simulate

    return simulate(cfg, run_dir, verbose=args.verbose, resume=args.resume is not None,
                    sign_key=sign_key)


def render(result: dict[str, Any]) -> str:
    """A short human summary of the report (:func:`fedpriv.audit.summary.render_summary`, which
    the ServerApp under ``flwr run`` prints too)."""
    from fedpriv.audit.summary import render_summary

    return render_summary(result)
