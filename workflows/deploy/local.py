"""``fedpriv deploy-local``: one fedpriv experiment on a real local Flower deployment.

The experiment configuration is validated completely before any process starts. The
federation has one client per SuperNode, so ``data.num_clients`` is set to the number of
SuperNodes; per-client mechanisms of ``[[mechanism.overrides]]`` are also handed to each
SuperNode through ``--node-config`` (``mechanism``, ``kappa``, ``noise-multiplier``, ...), the
way an operator would pin a mechanism on a node they run. The ServerApp writes
``report.json`` into the run directory; this module adds a ``deployment`` section.
"""

from __future__ import annotations

import json
import logging
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fedpriv
from fedpriv.config import Config
from fedpriv.errors import InputError
from fedpriv.mechanisms.config import node_config_keys
from fedpriv.validate import check_out_dir
from workflows.deploy.federation import Federation, NodeValue

log = logging.getLogger(__name__)

__all__ = [
    "MECHANISM_NODE_KEYS",
    "DeployPlan",
    "deploy_local",
    "node_configs",
    "plan_deployment",
    "project_app_dir",
]

# mechanism parameter -> SuperNode node-config key (the inverse of the ClientApp's map)
MECHANISM_NODE_KEYS: dict[str, str] = {v: k for k, v in node_config_keys().items()}
_RUN_CONFIG_KEYS = ("config", "out", "set")
log = logging.getLogger(__name__)


def node_configs(cfg: Config) -> list[dict[str, NodeValue]]:
    """Per-client node-config entries from ``[[mechanism.overrides]]`` (later ones win).

    Only parameters a node config can carry are passed (see :data:`MECHANISM_NODE_KEYS`);
    the rest reach the client with the run's configuration anyway.
    """
    nodes: list[dict[str, NodeValue]] = [{} for _ in range(cfg.data.num_clients)]
    for override in cfg.mechanism.overrides:
        for client_id in override["clients"]:
            nodes[client_id].update(
                {MECHANISM_NODE_KEYS[k]: _node_value(v)
                 for k, v in override.items() if k in MECHANISM_NODE_KEYS}
            )
    return nodes


def _node_value(value: Any) -> NodeValue:
    """Node config holds scalars: a list (``clip_per_layer``) travels comma-separated."""
    return ",".join(repr(v) for v in value) if isinstance(value, list) else value


def project_app_dir() -> Path:
    """The directory of the fedpriv Flower App (the project root holding pyproject.toml)."""
    return Path(fedpriv.__file__).resolve().parents[1]


def _check_app(app_dir: Path) -> None:
    """The app must declare the run-config keys deploy-local sets (Flower rejects others)."""
    pyproject = app_dir / "pyproject.toml"
    if not pyproject.is_file():
        raise InputError("--app", str(app_dir), "a Flower App directory with a pyproject.toml")
    declared = tomllib.loads(pyproject.read_text())
    declared = declared.get("tool", {}).get("flwr", {}).get("app", {}).get("config", {})
    missing = [k for k in _RUN_CONFIG_KEYS if k not in declared]
    if missing:
        raise InputError(
            "--app", str(app_dir), f"an app whose [tool.flwr.app.config] declares {missing}"
        )


def _overrides(overrides: list[str], supernodes: int) -> list[str]:
    """The ``--set`` items plus ``data.num_clients=N``; each must be one word (run config
    ``set`` is split at whitespace and semicolons)."""
    for text in overrides:
        if not text or any(c.isspace() or c == ";" for c in text):
            raise InputError("--set", text, "KEY=VALUE without spaces or semicolons")
        key, _, value = text.partition("=")
        if key.strip('"') == "data.num_clients" and value != str(supernodes):
            raise InputError("--set", text, f"data.num_clients={supernodes} (one per SuperNode)")
    return [*overrides, f"data.num_clients={supernodes}"]


@dataclass(frozen=True)
class DeployPlan:
    """Everything a local deployment of one experiment needs, validated."""

    app_dir: Path
    home: Path
    out: Path
    run_config: dict[str, str]
    node_configs: list[dict[str, NodeValue]]
    #: One line when the run is not the preset as written (its number of clients), else None.
    notice: str | None = None


def plan_deployment(
    config: Path,
    supernodes: int,
    out: Path,
    overrides: list[str] | None = None,
    app_dir: Path | None = None,
) -> DeployPlan:
    """Validate the experiment (config, overrides, app) and plan its run; start nothing.

    ``data.num_clients`` is set to ``supernodes``; the federation's directory (logs,
    certificates, keys, one FLWR_HOME per component) is ``out/flower``.
    """
    if supernodes < 1:
        raise InputError("supernodes", supernodes, "an integer >= 1")
    from workflows.config import load_config  # not at import: workflows.config imports the sweep

    sets = _overrides(list(overrides or ()), supernodes)
    cfg = load_config(config, sets)
    if cfg.audit.ground_truth:
        raise InputError("audit.ground_truth", True, "false in a deployment: the ground-truth "
                         "oracle ships record ids over the network and is for simulation only")
    app_dir = (app_dir or project_app_dir()).resolve()
    _check_app(app_dir)
    out = check_out_dir("--out", out).resolve()
    if out.is_dir() and any(out.iterdir()):
        raise InputError("--out", str(out), "a new or empty directory (a deployment never "
                         "writes into an existing run)")
    run_config = {"config": str(config.resolve()), "out": str(out), "set": " ".join(sets)}
    return DeployPlan(app_dir, out / "flower", out, run_config, node_configs(cfg),
                      _notice(config, list(overrides or ()), cfg))


def _notice(config: Path, overrides: list[str], cfg: Config) -> str | None:
    """The line that says the deployment does not run the preset as written: its
    ``data.num_clients`` differs from the SuperNodes (one client each), and with it every
    client's data and ε (:func:`strategies.federation_size.fewer_clients_line`). None when they
    agree (or the preset names no valid count alone)."""
    from strategies.federation_size import fewer_clients_line
    from workflows.config import load_config

    try:
        written = load_config(config, overrides)
    except InputError:
        return None
    if written.data.num_clients == cfg.data.num_clients:
        return None
    return fewer_clients_line(written, cfg, f"deploy-local runs one client per SuperNode "
                              f"({cfg.data.num_clients})", f"--supernodes "
                              f"{written.data.num_clients} runs the preset as written")


def _mark_interrupted(run_dir: Path) -> None:
    """After SIGINT or SIGTERM has stopped every process: a run left ``running`` was
    interrupted (its ServerApp was terminated by signal, without a chance to say so); mark it
    so and write its report of the completed rounds."""
    from fedpriv.audit import DB_NAME, AuditStore
    from strategies.server_run import close_run

    if not (run_dir / DB_NAME).is_file():
        return
    with AuditStore.open(run_dir) as store:
        if store.run_info()["status"] == "running":
            close_run(store, "interrupted", "stopped by a signal in fedpriv deploy-local")


def deploy_local(
    config: Path,
    supernodes: int,
    out: Path,
    *,
    tls: bool = False,
    auth: bool = False,
    overrides: list[str] | None = None,
    app_dir: Path | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Run ``config`` on a SuperLink and ``supernodes`` SuperNodes on 127.0.0.1.

    Parameters
    ----------
    config
        fedpriv TOML preset.
    supernodes
        Number of SuperNodes (= clients).
    out
        Run directory; the federation's directory (a FLWR_HOME per component, logs,
        certificates, keys) is ``out/flower``.
    tls, auth
        TLS with a throwaway CA; SuperNode authentication (needs ``tls``).
    overrides
        ``KEY=VALUE`` config overrides, as ``fedpriv simulate --set``.
    app_dir
        The Flower App to run (default: this project).
    timeout
        Seconds after which the run is stopped (None: no limit).

    Returns
    -------
    dict
        The ``report.json`` the ServerApp wrote, plus ``deployment`` (supernodes, tls, auth,
        run_id, flwr_home: the federation's directory, wall_seconds).
    """
    started = time.monotonic()
    plan = plan_deployment(config, supernodes, out, overrides, app_dir)
    if plan.notice:
        log.warning("%s", plan.notice)
    try:
        with Federation(
            plan.home, supernodes, tls=tls, auth=auth, node_configs=plan.node_configs
        ) as fed:
            outcome = fed.submit(plan.app_dir, plan.run_config, timeout=timeout)
    except KeyboardInterrupt:
        _mark_interrupted(plan.out)
        raise
    report_path = plan.out / "report.json"
    if not outcome.ok or not report_path.is_file():
        raise RuntimeError(
            f"run {outcome.run_id} ended with status {outcome.status!r} (flwr run exit code "
            f"{outcome.returncode}); report {report_path} "
            f"{'exists' if report_path.is_file() else 'missing'}; logs in {plan.home / 'logs'}"
        )
    report = json.loads(report_path.read_text())
    report["deployment"] = {
        "supernodes": supernodes,
        "notice": plan.notice,
        "tls": tls,
        "auth": auth,
        "run_id": outcome.run_id,
        "flwr_home": str(plan.home),
        "wall_seconds": time.monotonic() - started,
    }
    return report
