"""``mechanism.target_epsilon``: the run's noise parameter calibrated before the run starts.

Every client makes ``T = rounds × train.local_steps`` releases, sampled at its rate
``q = min(L, n)/n`` (Poisson batches), or as fixed-size batches of ``min(L, n)`` of its ``n``
records (``train.sampling = "fixed"``), accounted at ``audit.delta`` by ``audit.accountant``
under ``audit.neighbouring`` — as the run's ledger accounts them. At a given noise, ε grows
with ``q``, so among clients whose releases are alike the one with the fewest records (the
largest rate) has the largest ε; the noise is calibrated for it
(:func:`fedpriv.accounting.calibrate`, which never overshoots), so every client's ε over the
whole run is at most the target. Clients whose mechanisms differ in other parameters
(``[[mechanism.overrides]]`` setting ``clip_per_layer``, ``vmf_layers``, ...) are calibrated
group by group and the run takes the most noise any group needs.

The run's resolved config holds the calibrated value in ``[mechanism]`` and the record of the
calibration (``mechanism.calibration``: target, parameter, value, achieved ε, accountant, the
client and its rate) in place of the target; the store keeps it and ``report.json`` shows it
under ``config``. Calibrating a resolved config changes nothing, so the simulation and the
ServerApp body may both call :func:`calibrate_target`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from fedpriv.accounting.sampling import level_relation, sampled_population
from fedpriv.config import Config, config_from_dict, section_names
from fedpriv.errors import InputError
from fedpriv.mechanisms.config import TARGET_KEY, CalibrationRecord
from fedpriv.mechanisms.registry import build_mechanism, release_class
from fedpriv.protocol import sampling_rate

__all__ = ["calibrate_target", "calibrated", "planned_epsilon"]


def calibrate_target(cfg: Config) -> Config:
    """``cfg`` with its noise parameter calibrated to ``mechanism.target_epsilon`` for the
    partition and model the run will use (:func:`calibrated`); ``cfg`` itself without a target.

    Raises
    ------
    InputError
        Key ``mechanism.target_epsilon``: a target no noise parameter in the search range
        reaches, or one the accountant cannot account.
    """
    if cfg.mechanism.target_epsilon is None:
        return cfg
    return calibrated(cfg, *_sizes_and_dim(cfg))


def _sizes_and_dim(cfg: Config) -> tuple[list[int], int]:
    """The clients' numbers of records and the model's number of parameters in a run of
    ``cfg``."""
    from fedpriv.data import client_sizes, load_dataset
    from fedpriv.models import build_model, count_parameters

    d = cfg.data
    dataset = load_dataset(d.name, d.root, d.download, cfg.seed, d.test_fraction)
    dim = count_parameters(build_model(cfg.model.name, dataset.input_shape,
                                       dataset.num_classes))
    return client_sizes(d, dataset.train_y.numpy(), cfg.seed), dim


def calibrated(cfg: Config, sizes: Sequence[int], dim: int) -> Config:
    """``cfg`` with its noise parameter calibrated to ``mechanism.target_epsilon`` for clients
    of ``sizes`` records and a model of ``dim`` parameters (module docstring).

    Returns the resolved config: the calibrated value set in ``[mechanism]``, the target
    replaced by its record (:class:`~fedpriv.mechanisms.config.CalibrationRecord`).
    """
    target = cfg.mechanism.target_epsilon
    if target is None:
        return cfg
    records = [_calibrate(cfg, client, sizes[client], dim) for client in _largest_rates(cfg, sizes)]
    sign = release_class(cfg.mechanism.name).more_noise  # +1: sigma, lambda; -1: kappa
    record = max(records, key=lambda r: sign * math.log(r.value))
    raw = cfg.to_dict()
    mechanism = {k: v for k, v in raw["mechanism"].items() if k != TARGET_KEY}
    mechanism[record.parameter] = record.value
    raw["mechanism"] = {**mechanism, "calibration": dataclasses.asdict(record)}
    try:
        return config_from_dict(raw, carried=set(raw) - set(section_names()))
    except InputError as exc:  # the value lies outside the parameter's own range
        if exc.key != f"mechanism.{record.parameter}":
            raise
        raise InputError(f"mechanism.{TARGET_KEY}", target, f"an epsilon reached within "
                         f"mechanism.{record.parameter}'s range ({exc.allowed}): client "
                         f"{record.client} needs {record.value:.6g}") from None


def _largest_rates(cfg: Config, sizes: Sequence[int]) -> list[int]:
    """For each distinct mechanism among the clients, the client with the fewest records (the
    largest rate, hence the largest ε at a given noise)."""
    groups: dict[str, int] = {}
    for client, n in enumerate(sizes):
        name, params = cfg.mechanism.for_client(client)
        key = repr(sorted(params.items()))
        if key not in groups or n < sizes[groups[key]]:
            groups[key] = client
    return list(groups.values())


def planned_epsilon(cfg: Config) -> float:
    """The largest ε any client would spend over the whole run of ``cfg``, as the run's ledger
    accounts it: ``rounds ×
    train.local_steps`` releases at the client's rate, ``audit.delta``, ``audit.accountant``.
    ``deploy-local`` and the ServerApp say it when the federation changes the config's number
    of clients."""
    from fedpriv.accounting import ClientAccountant

    sizes, dim = _sizes_and_dim(cfg)  # calibration changes neither the data nor the model
    cfg = calibrated(cfg, sizes, dim)
    worst = 0.0
    for client in _largest_rates(cfg, sizes):
        name, params = cfg.mechanism.for_client(client)
        mech, q, population, steps = _releases(cfg, build_mechanism(name, params), sizes[client])
        accountant = ClientAccountant(cfg.audit.accountant,
                                      neighbouring=level_relation(mech.level,
                                                                  cfg.audit.neighbouring))
        accountant.record(mech.release(dim), q, steps, population)
        worst = max(worst, accountant.result(cfg.audit.delta).epsilon)
    return worst


def _releases(cfg: Config, mech: Any, n: int) -> tuple[Any, float, Any, int]:
    """``(mech, q, population, steps)``: how a client of ``n`` records releases over the run."""
    q = sampling_rate(n, cfg.train.batch_size)
    population = sampled_population(cfg.train.sampling, mech.level, q, n)
    return mech, q, population, cfg.rounds * cfg.train.local_steps


def _calibrate(cfg: Config, client: int, n: int, dim: int) -> CalibrationRecord:
    """The calibration of ``client``'s mechanism for its ``n`` records."""
    from fedpriv.accounting import calibrate

    name, params = cfg.mechanism.for_client(client)
    parameter = cfg.mechanism.noise_parameter()
    start = release_class(name).calibration_start(dim).parameter
    mech, q, population, steps = _releases(
        cfg, build_mechanism(name, {**params, parameter: start}), n)
    target = cfg.mechanism.target_epsilon
    try:
        cal = calibrate(mech.release(dim), target, delta=cfg.audit.delta, sample_rate=q,
                        steps=steps, accountant=cfg.audit.accountant, population=population,
                        neighbouring=level_relation(mech.level, cfg.audit.neighbouring))
    except InputError as exc:
        raise InputError(f"mechanism.{TARGET_KEY}", target, f"{exc.allowed} (client {client}: "
                         f"{steps:,} releases at q = {q:.4g}, delta = {cfg.audit.delta:g}, "
                         f"{cfg.audit.accountant} accountant)") from None
    return CalibrationRecord(float(target), parameter, cal.parameter, cal.result.epsilon,
                       cfg.audit.accountant, client, q, steps, population)
