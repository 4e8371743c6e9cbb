"""The ``flwr`` command line and the Flower 1.41 binaries, pointed at one private FLWR_HOME.

Flower 1.41 keeps CLI connections in ``$FLWR_HOME/config.toml``; :class:`FlwrCli` writes one
connection there and runs ``flwr`` subcommands against it, on a given host, with
``--format json`` where the answer is needed (``supernode register``, ``supernode ls``,
``ls``, ``stop``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from workflows.deploy.hosts import LOCALHOST, Host

__all__ = [
    "CONNECTION", "FLOWER_ENV", "FlwrCli", "RunOutcome", "flower_bin", "flower_env",
    "listed_status",
]

CONNECTION = "fedpriv-local"
# Offline, quiet, and no `uv sync` of the app's dependencies into a fresh environment per run.
FLOWER_ENV = {
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
}


def flower_bin(name: str) -> str:
    """Path of a Flower executable (``flwr``, ``flower-superlink``, ...) of this interpreter."""
    return str(Path(sys.executable).parent / name)


def flower_env(home: Path) -> dict[str, str]:
    """This process's environment with :data:`FLOWER_ENV`, ``FLWR_HOME=home`` and the
    interpreter's ``bin`` first on PATH (the SuperLink and SuperNodes start ``flower-superexec``,
    ``flwr-serverapp`` and ``flwr-clientapp`` by name)."""
    env = {**os.environ, **FLOWER_ENV, "FLWR_HOME": str(home)}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def listed_status(answer: dict[str, Any]) -> str:
    """The run's status in ``flwr ls --run-id N --format json``'s answer (``unknown`` when it
    lists no run)."""
    runs = answer.get("runs", [])
    return str(runs[0].get("status", "unknown")) if runs else "unknown"


@dataclass(frozen=True)
class RunOutcome:
    """What ``flwr run`` reported: run id, exit code, and the run's final status."""

    run_id: int | None
    returncode: int
    status: str

    @property
    def ok(self) -> bool:
        """Whether the run finished and completed (``finished:completed``)."""
        return self.returncode == 0 and self.status == "finished:completed"


class FlwrCli:
    """``flwr`` subcommands against the connection :data:`CONNECTION` in ``home``, run on
    ``host`` (the operator's machine) with environment ``env`` and working directory ``home``."""

    def __init__(self, home: Path, env: dict[str, str], host: Host = LOCALHOST) -> None:
        self.home = home
        self.env = env
        self.host = host

    def write_connection(self, address: str, root_certificates: Path | None) -> None:
        """Make ``address`` the default connection: TLS trusting ``root_certificates``, or
        insecure when it is None."""
        conn: dict[str, Any] = {"address": address}
        if root_certificates is None:
            conn["insecure"] = True
        else:
            conn["root-certificates"] = str(root_certificates)
        config = {"superlink": {"default": CONNECTION, CONNECTION: conn}}
        (self.home / "config.toml").write_text(tomli_w.dumps(config))

    def __call__(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``flwr ARGS``; stdout and stderr captured as text."""
        return subprocess.run(
            self.host.command([flower_bin("flwr"), *args]),
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def query(self, *args: str) -> dict[str, Any]:
        """``flwr ARGS <connection> --format json``, parsed (``success`` false on failure)."""
        done = self(*args, CONNECTION, "--format", "json")
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError:
            return {"success": False, "error": done.stdout + done.stderr}

    def register(self, public_key: Path) -> None:
        """``flwr supernode register``: allow the SuperNode holding this key to connect."""
        result = self.query("supernode", "register", str(public_key))
        if not result.get("success"):
            raise RuntimeError(f"flwr supernode register {public_key} failed: {result}")

    def nodes(self) -> list[dict[str, Any]]:
        """``flwr supernode ls``: one dict per SuperNode (``node-id``, ``status``, ...)."""
        return list(self.query("supernode", "ls").get("nodes", []))

    def run_status(self, run_id: int | None) -> str:
        """``flwr ls --run-id``: ``finished:completed``, ``finished:failed``, ... ."""
        if run_id is None:
            return "unknown: no run was started"
        return listed_status(self.query("ls", "--run-id", str(run_id)))

    def stop(self, run_id: int) -> None:
        """``flwr stop RUN_ID``."""
        self("stop", str(run_id), CONNECTION)

    def run_argv(self, app_dir: Path, run_config: dict[str, Any]) -> list[str]:
        """``flwr run APP_DIR <connection> --stream --run-config <file>`` on the host; the run
        config is written as a TOML file (any string survives, unlike inline ``-c 'k="v"'``)."""
        overrides = self.home / "run_config.toml"
        overrides.write_text(tomli_w.dumps(run_config))
        return self.host.command([flower_bin("flwr"), "run", str(app_dir.resolve()), CONNECTION,
                                  "--stream", "--run-config", str(overrides)])  # fmt: skip
