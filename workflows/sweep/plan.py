"""Plan a sweep: the run's accounting setting, and one calibrated cell per (mechanism, ε).

Every cell of a sweep shares the run's accounting setting (privacy-math.md §3): the sampling
rate ``q = min(L, n)/n`` of the client with the fewest records (the largest rate, so every
client's ε is at most the target), the number of noisy releases a client makes over the whole
run ``T = rounds × local_steps`` (every release counts; with ``fraction_train < 1`` a client
makes at most ``T``, so calibrating at ``T`` is conservative), ``δ`` and the accountant of
``[audit]``. :func:`plan_cell` calibrates the mechanism's noise parameter to the target ε with
:func:`fedpriv.accounting.calibrate` (bisection that never overshoots); :func:`cell_config`
turns a cell into the per-cell run configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from fedpriv.accounting.events import Release
from fedpriv.config import Config, config_from_dict
from fedpriv.errors import InputError
from fedpriv.mechanisms import make_release, release_class

__all__ = [
    "Cell",
    "SweepSetting",
    "cell_config",
    "cell_key",
    "check_sweepable",
    "plan_cell",
    "plan_cells",
    "sweep_setting",
]


@dataclass(frozen=True)
class SweepSetting:
    """What every cell of a sweep shares (the unit: one record of one client, add/remove).

    Attributes
    ----------
    sample_rate
        ``q``, the largest client sampling rate ``min(L, n_k)/n_k``.
    steps
        ``T = rounds × local_steps``, noisy releases per client over the whole run.
    dim
        ``p``, the number of model parameters (the released dimension).
    delta, accountant
        From ``[audit]``.
    client_sizes
        ``n_k`` of every client.
    num_classes, input_shape
        Of the data set (the chance level of accuracy is ``1/num_classes``).
    """

    sample_rate: float
    steps: int
    dim: int
    delta: float
    accountant: str
    client_sizes: tuple[int, ...]
    num_classes: int
    input_shape: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {**asdict(self), "client_sizes": list(self.client_sizes),
                "input_shape": list(self.input_shape)}


@dataclass(frozen=True)
class Cell:
    """One (mechanism, target ε) cell with its calibrated noise parameter.

    ``epsilon`` is the ε the accountant gives at ``parameter`` (never above ``target_epsilon``);
    ``route`` and ``optimal_order`` say where it came from.
    """

    mechanism: str
    target_epsilon: float
    parameter_name: str
    parameter: float
    epsilon: float
    route: str
    optimal_order: float | None

    def release(self, dim: int) -> Release:
        """One release of the cell's mechanism at its calibrated parameter."""
        return make_release(self.mechanism, self.parameter, dim)

    @property
    def key(self) -> str:
        """File-name key of the cell, e.g. ``gaussian-eps0.5``."""
        return cell_key(self.mechanism, self.target_epsilon)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def cell_key(mechanism: str, target_epsilon: float) -> str:
    """``<mechanism>-eps<ε>`` with ε in shortest round-trip form (``0.5``, ``170``)."""
    text = repr(float(target_epsilon))
    return f"{mechanism}-eps{text.removesuffix('.0')}"


def _model_dimension(cfg: Config, input_shape: tuple[int, ...], num_classes: int) -> int:
    from fedpriv.models import build_model, count_parameters

    return count_parameters(build_model(cfg.model.name, input_shape, num_classes))


def sweep_setting(cfg: Config) -> SweepSetting:
    """The accounting setting shared by every cell of ``cfg``'s sweep (module docstring)."""
    from fedpriv.data import load_dataset, partition_indices

    data = cfg.data
    dataset = load_dataset(data.name, data.root, data.download, cfg.seed, data.test_fraction)
    parts = partition_indices(dataset.train_y.numpy(), data.num_clients, data.partition,
                              data.dirichlet_alpha, cfg.seed)
    sizes = tuple(len(p) for p in parts)
    rate = max(min(cfg.train.batch_size, n) / n for n in sizes)
    shape = tuple(int(d) for d in dataset.input_shape)
    dim = _model_dimension(cfg, shape, dataset.num_classes)
    return SweepSetting(rate, cfg.rounds * cfg.train.local_steps, dim, cfg.audit.delta,
                        cfg.audit.accountant, sizes, dataset.num_classes, shape)


@contextmanager
def _quiet_absl() -> Iterator[None]:
    """dp-accounting logs one absl warning per skipped fractional order: keep stderr readable."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def plan_cell(setting: SweepSetting, mechanism: str, target_epsilon: float) -> Cell:
    """Calibrate ``mechanism``'s noise parameter to ``target_epsilon`` under ``setting``.

    Raises
    ------
    InputError
        The target cannot be reached (key ``sweep.epsilons``).
    """
    from fedpriv.accounting import calibrate

    try:
        with _quiet_absl():
            template = release_class(mechanism, "sweep.mechanisms").calibration_start(setting.dim)
            cal = calibrate(template, target_epsilon, delta=setting.delta,
                            sample_rate=setting.sample_rate, steps=setting.steps,
                            accountant=setting.accountant)
    except InputError as exc:  # name the config key behind the calibration's own name
        key = {"target_epsilon": "sweep.epsilons", "accountant": "audit.accountant"}
        raise InputError(key.get(exc.key, exc.key), exc.value,
                         f"{exc.allowed} (calibrating {mechanism} to epsilon "
                         f"{target_epsilon:g})") from exc
    res = cal.result
    return Cell(mechanism, float(target_epsilon), cal.parameter_name, cal.parameter,
                res.epsilon, res.route, res.optimal_order)


def plan_cells(cfg: Config, setting: SweepSetting | None = None) -> list[Cell]:
    """Every cell of ``cfg``'s sweep, mechanism-major, ε ascending."""
    setting = setting or sweep_setting(cfg)
    return [plan_cell(setting, m, e) for m in cfg.sweep.mechanisms
            for e in sorted(cfg.sweep.epsilons)]


def check_sweepable(cfg: Config) -> None:
    """Reject settings a sweep cannot honour, naming the key."""
    from attacks.registry import check_attack_names

    check_attack_names([cfg.sweep.attack], "sweep.attack")
    if cfg.mechanism.overrides:
        raise InputError("mechanism.overrides", f"{len(cfg.mechanism.overrides)} table(s)",
                         "none in a sweep (every client uses the cell's mechanism)")
    if not cfg.audit.enabled:
        raise InputError("audit.enabled", False, "true in a sweep (the attacks need the store)")
    if not cfg.audit.ground_truth:
        raise InputError("audit.ground_truth", False, "true in a sweep (scoring needs it)")


def cell_config(cfg: Config, cell: Cell) -> Config:
    """The run configuration of ``cell``: ``cfg`` with the cell's mechanism and parameter, and
    ``[audit]`` set to attack round 1 of the first ``sweep.attack_clients`` clients.

    Round 1 is the controlled comparison: every cell starts from the same θ (seeded
    initialisation) and samples the same first batch (the clients' generators are seeded by
    seed, client and round, and sample before they add noise), so only the noise differs.
    """
    raw = cfg.to_dict()
    raw["mechanism"] = {**raw["mechanism"], "name": cell.mechanism,
                        cell.parameter_name: cell.parameter}
    sweep = cfg.sweep
    raw["audit"] = {**raw["audit"], "attacks": [sweep.attack], "every": cfg.rounds,
                    "iterations": sweep.attack_iterations, "clients": sweep.attack_clients}
    return config_from_dict(raw)
