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

from fedpriv.audit.vacuity import terminal_marks
from fedpriv.errors import InputError
from fedpriv.failures import collapse_failures, round_ranges

__all__ = ["failure_lines", "register", "render", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a private federated training as a Flower simulation (Ray backend)",
        description="Run CONFIG as a Flower simulation on Ray; write DIR/report.json. "
        "--resume RUN_DIR continues a killed run after its last completed round, with the "
        "same results as an uninterrupted run when train.fraction_train = 1; --resume RUN_DIR "
        "--set rounds=N takes a finished or interrupted run on to N rounds.",
    )
    p.add_argument("config", metavar="CONFIG", nargs="?",
                   help="TOML preset, e.g. configs/quickstart.toml (omit with --resume)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set mechanism.noise_multiplier=0.5 "
                   "(with --resume only rounds=N)")
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
    for flag, given in (("CONFIG", args.config), ("--out", args.out)):
        if given:
            raise InputError(flag, given, "nothing with --resume (the stored config is used)")
    from fedpriv.audit import DB_NAME

    path = Path(args.resume)
    if not (path / DB_NAME).is_file():
        raise InputError("--resume", str(path), f"a run directory holding {DB_NAME}")
    return path


def _resumed_rounds(overrides: list[str]) -> Any:
    """The ``N`` of ``--resume RUN --set rounds=N`` (None without ``--set``): ``rounds`` is the
    one key a resumed run may change; any other is refused by name."""
    from fedpriv.schema import parse_override

    rounds = None
    for text in overrides:
        key, value = parse_override(text)
        if key != "rounds":
            raise InputError(f"--set {key}", value, "only rounds=N with --resume (the stored "
                             "config is used; a run goes on to N rounds)")
        rounds = value
    return rounds


def run(args: argparse.Namespace) -> dict[str, Any]:
    from workflows.config import load_config

    if args.resume is not None:
        from workflows.simulation import completed_rounds

        rounds = _resumed_rounds(args.overrides)
        run_dir = _resumed_run_dir(args).resolve()
        cfg, done = completed_rounds(run_dir)
        if rounds is not None and rounds != cfg.rounds:
            from strategies.server_run import extended

            cfg = extended(cfg, rounds, done)
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
    """A short human summary of the report."""
    acc = result["accuracy"]
    lines = [
        f"run directory: {result['run_dir']}",
        f"rounds: {result['rounds']}   final accuracy: {acc[-1]:.4f}" if acc else "no rounds",
        f"wall time: {_num(result['wall_seconds'])} s",
        f"{'client':>6} {'mechanism':>9} {'rounds':>6} {'epsilon':>9} {'log C':>10} {'SSIM':>6}",
    ]
    marks, footnote = terminal_marks(result["clients"], "log_bayes_capacity")
    for c, mark in zip(result["clients"], marks, strict=True):
        eps, cap, ssim = c["epsilon"], c["log_bayes_capacity"], (c["attack"] or {}).get("ssim")
        lines.append(
            f"{c['client_id']:>6} {c['mechanism'] or '-':>9} {c['rounds_participated']:>6} "
            f"{_num(eps):>9} {_num(cap) + mark:>10} {_num(ssim):>6}"
        )
    lines += footnote
    if result["epsilon_bounds"]["note"]:
        lines.append(result["epsilon_bounds"]["note"])
    lines += failure_lines(result.get("failures", []))
    return "\n".join(lines + _chain_lines(result["chain"]))


def failure_lines(failures: list[dict[str, Any]]) -> list[str]:
    """One line per distinct failure (:func:`fedpriv.failures.collapse_failures`) with the
    rounds it occurred in, its first round's message cut to 120 characters."""
    lines = []
    for f in collapse_failures(failures):
        rounds = f["rounds"]
        when = (f"round {rounds[0]}" if len(rounds) == 1
                else f"rounds {round_ranges(rounds)} ({len(rounds)}×)")
        lines.append(f"client {_num(f['client_id'])} (node {f['node_id']}) {f['kind']} in "
                     f"{when}: {f['message'][:120]}")
    return lines


def _chain_lines(chain: dict[str, Any]) -> list[str]:
    """The final chain head: keep it outside the run directory (``fedpriv verify RUN_DIR
    --head H`` checks every round's entries against it); each round's head is in
    ``--json``'s and report.json's ``chain.rounds``."""
    done = [int(r) for r in chain["rounds"]]
    after = f", rounds {round_ranges(done)}" if done else ""
    lines = [f"chain head: {chain['head']} ({chain['entries']} entries{after})"]
    if chain["signature"] is not None:
        lines.append(f"signed: entry {chain['signature']['seq']} by Ed25519 key "
                     f"{chain['signature']['public_key']}")
    return lines


def _num(x: Any) -> str:
    if x is None:
        return "-"
    return x if isinstance(x, str) else f"{x:.3g}"
