"""Plan a sweep: the accounting setting of each batch size, and one accounted cell per
(batch size, mechanism, noise parameter).

Every cell of a batch size shares its accounting setting (privacy-math.md §3): the sampling
rate ``q = min(L, n)/n`` of the client with the fewest records over every seed's partition
(the largest rate, so every client's ε is at most the cell's), the number of noisy releases a
client makes over the whole run ``T = rounds × local_steps`` (every release counts; with
``fraction_train < 1`` a client makes at most ``T``, so accounting at ``T`` is conservative;
with ``sweep.epochs`` set, ``local_steps = ⌈epochs · n_max / (rounds · L)⌉`` for the largest
client's ``n_max``), ``δ`` and the accountant of ``[audit]``.

A cell's noise parameter is calibrated to a target ε (:func:`plan_cell`, bisection that never
overshoots), given explicitly (:func:`account_cell`: its ε computed), or absent for a baseline
without a guarantee (:func:`baseline_cell`: ε = ∞). Beside the ε of per-step composition —
the correct one — each cell carries the ε of per-epoch composition (``T`` = the number of
epochs, ``round(T·q)``), the compatibility figure some published tables report; it
understates ε and is labelled so wherever it is shown.

:func:`cell_config` turns a cell and a seed into the run's configuration; with
``sweep.attack_on = "first-release"`` :func:`probe_config` adds the one-step probe that shows
the server the first noisy release of training (module :mod:`workflows.sweep.run`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from fedpriv.accounting.events import Release
from fedpriv.config import Config, config_from_dict
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism, release_class

__all__ = [
    "Cell",
    "SweepSetting",
    "account_cell",
    "baseline_cell",
    "batch_sizes",
    "cell_config",
    "cell_release",
    "check_sweepable",
    "plan_cell",
    "plan_cells",
    "probe_config",
    "run_key",
    "seeds",
    "sweep_setting",
]


@dataclass(frozen=True)
class SweepSetting:
    """What every cell of one batch size shares (the unit: one record of one client,
    add/remove neighbours).

    Attributes
    ----------
    batch_size
        ``L``, the expected batch size.
    local_steps
        Local steps per round (``train.local_steps``, or from ``sweep.epochs``).
    sample_rate
        ``q``, the largest client sampling rate ``min(L, n_k)/n_k`` over every seed.
    steps
        ``T = rounds × local_steps``, noisy releases per client over the whole run.
    dim
        ``p``, the number of model parameters (the released dimension).
    delta, accountant
        From ``[audit]``.
    client_sizes
        ``n_k`` of every client (first seed).
    num_classes, input_shape
        Of the data set (the chance level of accuracy is ``1/num_classes``).
    population
        ``n`` of the client with the largest rate under fixed-size batches
        (``train.sampling = "fixed"``: ``m = q·n`` of its ``n`` records without replacement,
        privacy-math.md §14); None for Poisson batches.
    neighbouring
        ``audit.neighbouring``.
    """

    batch_size: int
    local_steps: int
    sample_rate: float
    steps: int
    dim: int
    delta: float
    accountant: str
    client_sizes: tuple[int, ...]
    num_classes: int
    input_shape: tuple[int, ...]
    population: int | None = None
    neighbouring: str = "add-remove"

    @property
    def epochs(self) -> float:
        """Expected passes over the records of the client with the largest rate: ``T·q``."""
        return self.steps * self.sample_rate

    @property
    def epoch_releases(self) -> int:
        """``T`` under per-epoch composition (a compatibility unit): ``round(T·q)``, ≥ 1."""
        return max(1, round(self.epochs))

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {**asdict(self), "client_sizes": list(self.client_sizes),
                "input_shape": list(self.input_shape), "epochs": self.epochs,
                "epoch_releases": self.epoch_releases}


def _number(value: float) -> str:
    """Shortest round-trip form of a number (``0.5``, ``170``, ``1.23``)."""
    return repr(float(value)).removesuffix(".0")


@dataclass(frozen=True)
class Cell:
    """One (batch size, mechanism, noise parameter) cell, accounted.

    ``target_epsilon`` is set for a calibrated cell and ``None`` otherwise; ``epsilon`` is the
    ε of per-step composition at ``parameter`` (never above a target; ∞ for a baseline),
    ``epsilon_per_epoch`` the compatibility figure; ``route`` and ``optimal_order`` say where
    ``epsilon`` came from.
    """

    mechanism: str
    batch_size: int
    target_epsilon: float | None
    parameter_name: str | None
    parameter: float | None
    epsilon: float
    epsilon_per_epoch: float
    route: str | None
    optimal_order: float | None

    def release(self, dim: int, params: Mapping[str, Any] | None = None) -> Release:
        """One release of the cell's accountable mechanism at its parameter, with the
        ``[mechanism]`` parameters ``params`` (:func:`cell_release`)."""
        return cell_release(self.mechanism, self.parameter, dim, params)

    @property
    def key(self) -> str:
        """File-name key: ``gaussian-eps0.5-L128``, ``vmf-kappa75-L128``, ``none-L128``."""
        if self.target_epsilon is not None:
            value = f"-eps{_number(self.target_epsilon)}"
        elif self.parameter is not None:
            value = f"-{self.parameter_name}{_number(self.parameter)}"
        else:
            value = ""
        return f"{self.mechanism}{value}-L{self.batch_size}"

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def run_key(cell: Cell, seed: int) -> str:
    """Key of one seed's run of ``cell``: ``<cell key>-seed<s>``."""
    return f"{cell.key}-seed{seed}"


def seeds(cfg: Config) -> list[int]:
    """The seeds each cell runs with: ``sweep.seeds``, or the top-level ``seed``."""
    return list(cfg.sweep.seeds) or [cfg.seed]


def batch_sizes(cfg: Config) -> list[int]:
    """The batch sizes swept: ``sweep.batch_sizes``, or ``train.batch_size``."""
    return list(cfg.sweep.batch_sizes) or [cfg.train.batch_size]


def _model_dimension(cfg: Config, input_shape: tuple[int, ...], num_classes: int) -> int:
    from fedpriv.models import build_model, count_parameters

    return count_parameters(build_model(cfg.model.name, input_shape, num_classes))


def _client_sizes(cfg: Config, seed: int) -> tuple[tuple[int, ...], Any]:
    from fedpriv.data import client_sizes, load_dataset

    data = cfg.data
    dataset = load_dataset(data.name, data.root, data.download, seed, data.test_fraction)
    return tuple(client_sizes(data, dataset.train_y.numpy(), seed)), dataset


def sweep_setting(cfg: Config, batch_size: int | None = None) -> SweepSetting:
    """The accounting setting shared by every cell of ``batch_size`` (default
    ``train.batch_size``) in ``cfg``'s sweep (module docstring).

    Raises
    ------
    InputError
        ``sweep.epochs`` asks for more local steps per round than a reply may declare.
    """
    from fedpriv.protocol import MAX_LOCAL_STEPS

    batch = batch_size or cfg.train.batch_size
    per_seed = [_client_sizes(cfg, s) for s in seeds(cfg)]
    sizes, dataset = per_seed[0]
    rate = max(min(batch, n) / n for found, _ in per_seed for n in found)
    local_steps = cfg.train.local_steps
    if cfg.sweep.epochs is not None:
        largest = max(n for found, _ in per_seed for n in found)
        local_steps = math.ceil(round(cfg.sweep.epochs * largest / (cfg.rounds * batch), 9))
        if local_steps > MAX_LOCAL_STEPS:
            raise InputError("sweep.epochs", cfg.sweep.epochs,
                             f"at most {MAX_LOCAL_STEPS:,} local steps per round (batch "
                             f"size {batch} asks for {local_steps:,}): more rounds")
    shape = tuple(int(d) for d in dataset.input_shape)
    dim = _model_dimension(cfg, shape, dataset.num_classes)
    fixed = cfg.train.sampling == "fixed" and rate < 1.0  # the smallest client: the largest ε
    population = min(n for found, _ in per_seed for n in found) if fixed else None
    return SweepSetting(batch, local_steps, rate, cfg.rounds * local_steps, dim,
                        cfg.audit.delta, cfg.audit.accountant, sizes, dataset.num_classes, shape,
                        population, cfg.audit.neighbouring)


def cell_release(mechanism: str, parameter: float | None, dim: int,
                 params: Mapping[str, Any] | None = None) -> Release:
    """One release of ``mechanism`` at its noise ``parameter``, built as the cell's runs build
    it: with the config's ``[mechanism]`` parameters ``params`` (clip bounds, per-layer VMF:
    ``vmf_layers = "per-layer"`` releases one VMF per parameter tensor, whose RDP is the
    blocks' sum — not the one-block VMF's)."""
    values = dict(params or {})
    if parameter is not None:  # a baseline (none, clip) has none
        values[release_class(mechanism, "sweep.mechanisms").parameter_name] = parameter
    return build_mechanism(mechanism, values).release(dim)


def _account(setting: SweepSetting, release: Release, steps: int) -> Any:
    """The accountant's result for ``steps`` releases at the setting's rate and δ."""
    from fedpriv.accounting import ReleaseEvent, epsilon

    event = ReleaseEvent(release, setting.sample_rate, steps, setting.population)
    return epsilon([event], setting.delta, accountant=setting.accountant,
                   neighbouring=setting.neighbouring)


def _per_epoch(setting: SweepSetting, release: Release) -> float:
    """ε of ``release`` composed once per epoch (compatibility; understates ε)."""
    return _account(setting, release, setting.epoch_releases).epsilon


def plan_cell(setting: SweepSetting, mechanism: str, target_epsilon: float,
              params: Mapping[str, Any] | None = None) -> Cell:
    """Calibrate ``mechanism``'s noise parameter to ``target_epsilon`` under ``setting``, its
    release built with the ``[mechanism]`` parameters ``params`` (:func:`cell_release`).

    Raises
    ------
    InputError
        The target cannot be reached (key ``sweep.epsilons``).
    """
    from fedpriv.accounting import calibrate

    try:
        start = release_class(mechanism, "sweep.mechanisms").calibration_start(setting.dim)
        template = cell_release(mechanism, start.parameter, setting.dim, params)
        cal = calibrate(template, target_epsilon, delta=setting.delta,
                        sample_rate=setting.sample_rate, steps=setting.steps,
                        accountant=setting.accountant, population=setting.population,
                        neighbouring=setting.neighbouring)
    except InputError as exc:  # name the config key behind the calibration's own name
        key = {"target_epsilon": "sweep.epsilons", "accountant": "audit.accountant"}
        raise InputError(key.get(exc.key, exc.key), exc.value,
                         f"{exc.allowed} (calibrating {mechanism} to epsilon "
                         f"{target_epsilon:g})") from exc
    res = cal.result
    per_epoch = _per_epoch(setting, template.with_parameter(cal.parameter))
    return Cell(mechanism, setting.batch_size, float(target_epsilon), cal.parameter_name,
                cal.parameter, res.epsilon, per_epoch, res.route, res.optimal_order)


def account_cell(setting: SweepSetting, mechanism: str, parameter: float,
                 params: Mapping[str, Any] | None = None) -> Cell:
    """The cell of ``mechanism`` at the given noise ``parameter``, its ε computed (release
    built with the ``[mechanism]`` parameters ``params``, :func:`cell_release`)."""
    release = cell_release(mechanism, parameter, setting.dim, params)
    res = _account(setting, release, setting.steps)
    return Cell(mechanism, setting.batch_size, None, release.parameter_name, float(parameter),
                res.epsilon, _per_epoch(setting, release), res.route, res.optimal_order)


def baseline_cell(setting: SweepSetting, mechanism: str) -> Cell:
    """The cell of a mechanism without a formal guarantee (``none``, ``clip``): ε = ∞."""
    return Cell(mechanism, setting.batch_size, None, None, None, math.inf, math.inf, None, None)


def plan_cells(cfg: Config, setting: SweepSetting) -> list[Cell]:
    """Every cell of ``setting``'s batch size: per mechanism its calibrated cells (ε
    ascending), then its explicit ones (as listed); then the baselines."""
    sweep = cfg.sweep
    cells = []
    params = cfg.mechanism.params  # as every cell's runs build their releases
    for mechanism in sweep.mechanisms:
        cells += [plan_cell(setting, mechanism, e, params) for e in sorted(sweep.epsilons)]
        cells += [account_cell(setting, mechanism, v, params)
                  for v in sweep.parameters.get(mechanism, [])]
    return cells + [baseline_cell(setting, m) for m in sweep.baselines]


def check_sweepable(cfg: Config) -> None:
    """Reject settings a sweep cannot honour, naming the key."""
    from attacks.registry import check_attack_names

    check_attack_names([cfg.sweep.attack], "sweep.attack")
    if cfg.mechanism.target_epsilon is not None:
        raise InputError("mechanism.target_epsilon", cfg.mechanism.target_epsilon,
                         "unset in a sweep (sweep.epsilons calibrates each cell)")
    if cfg.mechanism.overrides:
        raise InputError("mechanism.overrides", f"{len(cfg.mechanism.overrides)} table(s)",
                         "none in a sweep (every client uses the cell's mechanism)")
    if cfg.mechanism.params.get("vmf_kappas") is not None:  # would override every cell's κ
        raise InputError("mechanism.vmf_kappas", list(cfg.mechanism.params["vmf_kappas"]),
                         "unset in a sweep (each VMF cell sets one kappa for every layer)")
    if not cfg.audit.enabled:
        raise InputError("audit.enabled", False, "true in a sweep (the attacks need the store)")
    if not cfg.audit.ground_truth:
        raise InputError("audit.ground_truth", False, "true in a sweep (scoring needs it)")


def cell_config(cfg: Config, setting: SweepSetting, cell: Cell, seed: int) -> Config:
    """The run configuration of ``cell`` with ``seed``: ``cfg`` with the cell's mechanism,
    parameter and batch size, the setting's local steps, and ``[audit]`` set to attack round 1
    of the first ``sweep.attack_clients`` clients — or nothing, when the probe does
    (``sweep.attack_on = "first-release"``).

    Round 1 is the controlled comparison: for a given seed every cell starts from the same θ
    (seeded initialisation) and samples the same first batch (the clients' generators are
    seeded by seed, client and round, and sample before they add noise), so only the noise
    differs.
    """
    raw = cfg.to_dict()
    raw["seed"] = seed
    raw["train"] = {**raw["train"], "batch_size": cell.batch_size,
                    "local_steps": setting.local_steps}
    raw["mechanism"] = {**raw["mechanism"], "name": cell.mechanism}
    if cell.parameter_name is not None:
        raw["mechanism"][cell.parameter_name] = cell.parameter
    sweep = cfg.sweep
    attacks = [sweep.attack] if sweep.attack_on == "round-1-update" else []
    raw["audit"] = {**raw["audit"], "attacks": attacks, "every": cfg.rounds,
                    "iterations": sweep.attack_iterations, "clients": sweep.attack_clients,
                    "round_seconds": 0}  # the attacks are the measurement: never cut short
    return config_from_dict(raw)


def probe_config(run: Config) -> Config:
    """The one-step probe of a run: one round of one local step of plain SGD at learning rate
    1, its update attacked.

    The probe starts from the run's θ₀ with the run's seed, so its client samples the same
    first batch and draws the same noise as the run's first local step (the optimiser draws no
    randomness): the server of the probe holds ``−Δ`` = the first noisy release of training,
    up to float32 rounding — what an adversary who sees each DP-SGD release (the published
    study's threat model) sees, not the multi-step round update a federated server receives.
    It adds no release to the accounting: it repeats the run's first one.
    """
    raw = run.to_dict()
    raw["rounds"] = 1
    raw["train"] = {**raw["train"], "local_steps": 1, "lr": 1.0, "optimizer": "sgd",
                    "momentum": 0.0, "nesterov": False, "weight_decay": 0.0}
    raw["audit"] = {**raw["audit"], "attacks": [run.sweep.attack], "every": 1,
                    "round_seconds": 0}
    return config_from_dict(raw)
