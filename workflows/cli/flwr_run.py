"""``fedpriv flwr-run [APP] [SUPERLINK] [FLWR-RUN OPTIONS]``: ``flwr run ... --stream`` whose
exit code is the run's.

Flower 1.42's ``flwr run`` exits 0 once the run is submitted, whatever the run then does (a
ServerApp that raises ends ``finished:failed``, Flower exit code 700, and ``flwr run`` still
exits 0). This command streams the run as ``flwr run --stream`` does, then asks the SuperLink
for the run's status (``flwr list --run-id``) and exits 1 unless it is
``finished:completed``. Every argument is ``flwr run``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Any

__all__ = ["exit_code", "register", "render", "run"]

#: What ``flwr run`` prints once the SuperLink has accepted the run.
_STARTED = re.compile(r"Successfully started run (\d+)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "flwr-run",
        help="flwr run --stream, exiting 1 when the run fails",
        description="Run `flwr run ARGS --stream` and exit with the run's outcome: 0 when it "
        "ends finished:completed, 1 otherwise (flwr run itself exits 0 once a run is "
        "submitted). ARGS are flwr run's, e.g. . --federation-config 'num-supernodes=10' "
        "-c \"config='configs/quickstart.toml'\".",
    )
    p.add_argument("flwr_args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="flwr run's arguments (default: .)")
    p.set_defaults(func=run)


def _connection(args: list[str]) -> list[str]:
    """The SuperLink connection named after the app directory, as ``flwr run`` reads it."""
    return args[1:2] if len(args) > 1 and not args[1].startswith("-") else []


def run(args: argparse.Namespace) -> dict[str, Any]:
    from workflows.deploy.flwr_cli import FLOWER_ENV, flower_bin, listed_status

    flwr_args = list(args.flwr_args) or ["."]
    env = {**FLOWER_ENV, **os.environ}  # what the caller exported wins
    cmd = [flower_bin("flwr"), "run", *flwr_args,
           *([] if "--stream" in flwr_args else ["--stream"])]
    run_id = None
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", file=sys.stderr, flush=True)
            started = _STARTED.search(line)
            run_id = int(started.group(1)) if started and run_id is None else run_id
    status = "unknown: no run was started"
    if run_id is not None:
        done = subprocess.run([flower_bin("flwr"), "list", *_connection(flwr_args), "--run-id",
                               str(run_id), "--format", "json"], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        try:
            status = listed_status(json.loads(done.stdout))
        except json.JSONDecodeError:
            status = f"unknown: {(done.stdout + done.stderr).strip()[:200]}"
    return {"run_id": run_id, "status": status, "flwr_returncode": proc.returncode}


def render(result: dict[str, Any]) -> str:
    return f"fedpriv flwr-run: run {result['run_id']} ended {result['status']}"


def exit_code(result: dict[str, Any]) -> int:
    """0 for a run that finished and completed, 1 otherwise."""
    ok = result["flwr_returncode"] == 0 and result["status"] == "finished:completed"
    return 0 if ok else 1
