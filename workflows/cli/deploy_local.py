"""``fedpriv deploy-local CONFIG --supernodes N [--tls] [--auth] [--set KEY=VALUE ...]
[--out DIR] [--json]``: the experiment on a real SuperLink + N SuperNodes on 127.0.0.1."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fedpriv.errors import InputError

__all__ = ["register", "render", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "deploy-local",
        help="run a private federated training on a real local Flower deployment",
        description="Start a SuperLink and N SuperNodes on 127.0.0.1 (optionally with TLS and "
        "SuperNode authentication), run CONFIG with `flwr run`, stop everything, and print the "
        "report the ServerApp wrote (DIR/report.json) plus deployment details.",
    )
    p.add_argument("config", metavar="CONFIG", help="TOML preset, e.g. configs/quickstart.toml")
    p.add_argument(
        "--supernodes",
        type=int,
        required=True,
        metavar="N",
        help="number of SuperNodes, one client each (N >= 1)",
    )
    p.add_argument("--tls", action="store_true", help="TLS with a throwaway CA")
    p.add_argument(
        "--auth",
        action="store_true",
        help="SuperNode authentication with registered ECDSA keys (needs --tls)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set rounds=3",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="run directory (default runs/<preset>-<time>); Flower's state and "
        "logs go to DIR/flower",
    )
    p.add_argument("--app", metavar="DIR", help="Flower App directory (default: this project)")
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop the run after this many seconds (default: no limit)",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=run)


def _check_flags(args: argparse.Namespace) -> None:
    if args.supernodes < 1:
        raise InputError("--supernodes", args.supernodes, "an integer >= 1")
    if args.auth and not args.tls:
        raise InputError(
            "--auth",
            True,
            "--auth together with --tls (Flower refuses "
            "SuperNode authentication over insecure connections)",
        )
    if args.timeout is not None and not args.timeout > 0:
        raise InputError("--timeout", args.timeout, "a number of seconds > 0")
    if not Path(args.config).is_file():
        raise InputError("CONFIG", args.config, "an existing TOML file")


def run(args: argparse.Namespace) -> dict[str, Any]:
    _check_flags(args)
    from workflows.cli.simulate import default_run_dir
    from workflows.deploy.local import deploy_local

    return deploy_local(
        Path(args.config),
        args.supernodes,
        Path(args.out) if args.out else default_run_dir(args.config),
        tls=args.tls,
        auth=args.auth,
        overrides=args.overrides,
        app_dir=Path(args.app) if args.app else None,
        timeout=args.timeout,
    )


def render(result: dict[str, Any]) -> str:
    """The simulate summary plus one line about the deployment."""
    from workflows.cli.simulate import render as render_run

    d = result["deployment"]
    security = "TLS + SuperNode auth" if d["auth"] else ("TLS" if d["tls"] else "insecure")
    return (
        f"{render_run(result)}\n"
        f"deployment: {d['supernodes']} SuperNodes, {security}, run {d['run_id']}, "
        f"{d['wall_seconds']:.1f} s in all; Flower logs in {d['flwr_home']}/logs"
        + (f"\nnot the preset as written: {d['notice']}" if d.get("notice") else "")
    )
