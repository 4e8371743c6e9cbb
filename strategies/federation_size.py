"""Fit a run to the federation Flower simulates (``flwr run .`` with a simulation SuperLink).

A preset names its number of clients (``data.num_clients``); a Flower simulation has as many
SuperNodes as its federation config says (Flower 1.42: 2 unless ``num-supernodes`` is set), and
every one of them partitions the data by its own ``num-partitions``. Waiting for clients that a
simulation will never start would only end in ``strategy.join_timeout``, so in a simulation the
run takes the number of SuperNodes as its number of clients and says so in one line, with the
largest client ε of each (:func:`fewer_clients_line`; ``deploy-local`` says the same). A
configuration that cannot run with that many clients (e.g. per-client mechanisms naming client
9 of 2, or an ``[[adversary]]`` table the server carries unread naming such a client:
:func:`check_carried_clients`) is refused at once, naming both settings. In a deployment
SuperNodes join over time: the run waits for ``data.num_clients`` of them as before
(:class:`~strategies.auditing.AuditingStrategy`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from flwr.serverapp import Grid
from flwr.superlink.grid import InMemoryGrid

from fedpriv.config import Config, config_from_dict
from fedpriv.errors import InputError
from strategies.config import CARRIED_SECTIONS

__all__ = ["check_carried_clients", "fewer_clients_line", "fit_to_federation", "simulated_nodes"]

log = logging.getLogger(__name__)
_POLL_SECONDS = 0.1
#: Polls with an unchanged node count after which a simulation's federation is complete
#: (Flower registers every simulated node before it starts the first ClientApp).
_STABLE_POLLS = 5


def simulated_nodes(grid: Grid, timeout: float) -> int:
    """The number of SuperNodes in a simulation once registration has settled: a count above
    zero, unchanged over :data:`_STABLE_POLLS` polls (at most ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    count, stable = 0, 0
    while stable < _STABLE_POLLS and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        now = len(list(grid.get_node_ids()))
        stable = stable + 1 if now == count and now > 0 else 0
        count = now
    return count


def check_carried_clients(cfg: Config) -> None:
    """Refuse a carried section's table (``[[adversary]]``: the clients validate it, and the
    server does not import them) that names a client the run does not have.

    Raises
    ------
    InputError
        Naming the table's ``clients`` key, e.g. ``adversary[0].clients``.
    """
    n = cfg.data.num_clients
    for name, value in cfg.sections.items():
        tables = value if isinstance(value, list) else [value]
        for i, table in enumerate(tables):
            ids = table.get("clients") if isinstance(table, Mapping) else None
            if isinstance(ids, list) and not all(
                    isinstance(c, int) and not isinstance(c, bool) and 0 <= c < n for c in ids):
                key = f"{name}[{i}].clients" if isinstance(value, list) else f"{name}.clients"
                raise InputError(key, ids, f"client ids in [0, {n - 1}] (data.num_clients = {n})")


def fit_to_federation(grid: Grid, cfg: Config) -> Config:
    """``cfg`` with ``data.num_clients`` set to the number of simulated SuperNodes when ``grid``
    is a simulation's; ``cfg`` itself in a deployment or when the two agree.

    Raises
    ------
    InputError
        When the configuration is invalid with the simulated number of clients; the message
        names ``data.num_clients`` and the federation's ``num-supernodes``.
    """
    if not isinstance(grid, InMemoryGrid):
        return cfg
    wanted = cfg.data.num_clients
    nodes = simulated_nodes(grid, cfg.strategy.join_timeout)
    if nodes in (0, wanted):
        return cfg
    hint = f"flwr run . --federation-config 'num-supernodes={wanted}'"
    raw = cfg.to_dict()
    raw["data"] = {**raw.get("data", {}), "num_clients": nodes}
    try:
        fitted = config_from_dict(raw, carried=CARRIED_SECTIONS)
        check_carried_clients(fitted)
    except InputError as exc:
        raise InputError("data.num_clients", wanted, f"the federation's {nodes} simulated "
                         f"SuperNodes (run with {hint}): with {nodes} clients, {exc}") from None
    log.warning("%s", fewer_clients_line(cfg, fitted, f"the federation simulates {nodes} "
                "SuperNodes", f"{hint} runs the preset as written"))
    return fitted


def fewer_clients_line(cfg: Config, fitted: Config, why: str, how: str) -> str:
    """The one line that says a run is not its config: ``why`` runs ``fitted`` instead of
    ``cfg`` (another ``data.num_clients``), with the largest ε a client spends under each
    (:func:`fedpriv.calibration.planned_epsilon`: each client then holds another share of
    the data, so its sampling rate and ε change — or, with ``mechanism.target_epsilon``, the
    noise calibrated to it); ``how`` runs the config as written."""
    from fedpriv.calibration import calibrate_target, planned_epsilon

    if cfg.mechanism.target_epsilon is None:
        changed = (f"epsilon (largest client epsilon {planned_epsilon(cfg):.3g} -> "
                   f"{planned_epsilon(fitted):.3g})")
    else:
        name = cfg.mechanism.noise_parameter()
        before, after = (calibrate_target(c).to_dict()["mechanism"][name] for c in (cfg, fitted))
        changed = (f"the noise calibrated to mechanism.target_epsilon (mechanism.{name} "
                   f"{before:.4g} -> {after:.4g})")
    return (f"{why}, the config names {cfg.data.num_clients} clients (data.num_clients): "
            f"running with {fitted.data.num_clients}, which changes every client's data and "
            f"{changed}; {how}")
