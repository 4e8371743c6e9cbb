"""One federated run on any Flower Grid (simulation or deployment): the ServerApp's body.

A run writes every round to its audit store as the round completes — the broadcast θ, every
reply, the tallies, the attacks, and the aggregated global model after the round — so a killed
run keeps everything it finished. ``report.json`` is rebuilt after a round when at least
:data:`REPORT_SPACING` times the last rebuild's duration has passed since it — after every
round of a small run; for a large one (a rebuild reads every completed round) rebuilding costs
at most ≈ 1/REPORT_SPACING of the run — and always when the run ends.

``resume=True`` continues a run directory: incomplete rounds are discarded, the global model
is the stored aggregate of the last completed round, every client's privacy ledger is
rebuilt from the stored updates, and Flower's rounds are shifted by the number of completed
rounds (``AuditingStrategy.round_offset``) so that round numbers — and with them the clients'
seeds, derived from (seed, partition id, absolute round) — are those of an uninterrupted run.
With ``train.fraction_train = 1`` (every client every round) the resumed rounds reproduce the
uninterrupted run exactly; with a smaller fraction Flower samples clients with Python's
unseeded global ``random``, so neither an uninterrupted nor a resumed run is reproducible.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord
from flwr.serverapp import Grid
from tqdm import tqdm

from fedpriv.audit import AuditStore, check_intact, verify, write_report
from fedpriv.audit.config import check_release_size
from fedpriv.audit.signing import sign_head
from fedpriv.calibration import calibrate_target
from fedpriv.config import Config, config_from_dict
from fedpriv.data import Dataset, load_dataset
from fedpriv.errors import InputError
from fedpriv.models import build_model
from fedpriv.protocol import CONFIG_KEY, PROTOCOL_KEY, PROTOCOL_VERSION
from strategies.aggregation import build_strategy
from strategies.auditing import AuditingStrategy
from strategies.config import CARRIED_SECTIONS
from strategies.evaluation import make_evaluate_fn
from strategies.pipeline import AuditPipeline

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = [
    "REPORT_SPACING", "close_run", "dataset_of", "extended", "initial_model", "open_run",
    "run_federation",
]

log = logging.getLogger(__name__)
#: Seconds between report rebuilds during a run, in units of the last rebuild's duration.
REPORT_SPACING = 20.0


def dataset_of(cfg: Config) -> Dataset:
    """The run's data set (cached per process)."""
    d = cfg.data
    return load_dataset(d.name, d.root, d.download, cfg.seed, d.test_fraction)


def initial_model(cfg: Config) -> torch.nn.Module:
    """The global model before round 1, initialised deterministically from ``cfg.seed``
    without touching the process's global RNG."""
    dataset = dataset_of(cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return build_model(cfg.model.name, dataset.input_shape, dataset.num_classes)


def _strategy(cfg: Config, auditor: AuditPipeline, round_offset: int) -> AuditingStrategy:
    return AuditingStrategy(
        build_strategy(cfg.strategy, cfg.train.fraction_train), auditor,
        num_nodes=cfg.data.num_clients, join_timeout=cfg.strategy.join_timeout,
        round_offset=round_offset, budgets=cfg.mechanism.has_budgets,
    )


def open_run(cfg: Config, run_dir: Path, resume: bool) -> tuple[AuditStore, int]:
    """The run's store, opened for writing, and the number of rounds already completed.

    A new run creates the store (refused where one exists). A resumed run must carry the same
    configuration but for ``rounds`` — a run extended (or an interrupted one cut short, down
    to its completed rounds) stores the new count: :func:`extended` — must not be running in
    another process (the store's writer lock) and must be intact (its hash chain and tensor
    files: :func:`fedpriv.audit.check_intact`, before anything is written); its incomplete
    rounds are discarded. The returned store holds the writer lock until closed.
    """
    if not resume:
        store = AuditStore.create(run_dir, cfg.to_dict(), cfg.seed)
        store.hold_writer_lock()
        return store, 0
    store = AuditStore.open(run_dir)
    try:
        store.hold_writer_lock()
        check_intact(run_dir)
        stored = config_from_dict(store.run_info()["config"], carried=CARRIED_SECTIONS)
        if stored.rounds != cfg.rounds:
            stored = extended(stored, cfg.rounds, store.last_completed_round() or 0)
        if stored != cfg:
            raise InputError("--resume", str(run_dir), "a run made with this configuration")
    except InputError:
        store.close()
        raise
    if store.run_info()["config"]["rounds"] != cfg.rounds:
        store.set_rounds(cfg.rounds)
    dropped = store.discard_incomplete_rounds()
    done = store.last_completed_round() or 0
    log.info("resuming %s after round %d (discarded incomplete rounds %s)", run_dir, done, dropped)
    store.mark_status("running")
    return store, done


def extended(cfg: Config, rounds: int, done: int) -> Config:
    """A stored run's config ``cfg`` to go on to ``rounds`` rounds after its ``done`` completed
    ones (``--resume RUN --set rounds=N``): what a run of ``rounds`` from the start would have
    used, everything else unchanged.

    Raises
    ------
    InputError
        ``rounds`` below ``done``, or not a valid ``rounds``; a noise calibrated to
        ``mechanism.target_epsilon`` over the stored rounds (a run of ``rounds`` would have
        calibrated another).
    """
    raw = cfg.to_dict()
    if raw["mechanism"].get("calibration") is not None:
        raise InputError("rounds", rounds, f"{cfg.rounds}, the stored rounds: the noise was "
                         "calibrated to mechanism.target_epsilon over them")
    if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds < done:
        raise InputError("rounds", rounds, f"at least the {done} rounds the run completed")
    return config_from_dict({**raw, "rounds": rounds}, carried=CARRIED_SECTIONS)


def _start_arrays(cfg: Config, store: AuditStore, done: int) -> ArrayRecord:
    """θ for the first round to run: the initial model, or the last completed aggregate."""
    if done == 0:
        return ArrayRecord(initial_model(cfg).state_dict())
    stored = store.load_aggregate(done)
    return ArrayRecord({name: Array(array) for name, array in stored.items()})


def _evaluate_fn(
    cfg: Config, store: AuditStore, auditor: AuditPipeline, done: int, bar: tqdm
) -> Callable[[int, ArrayRecord], MetricRecord]:
    """Flower's ``evaluate_fn``: after Flower round r (absolute ``done + r``) store the
    aggregate, evaluate it, close the round in the store and rebuild the report (paced: see
    the module docstring)."""
    last = {"seconds": 0.0, "at": -math.inf}

    def on_result(server_round: int, acc: float, loss: float) -> None:
        if server_round == 0:
            return
        auditor.end_round(done + server_round, acc, loss)
        if time.monotonic() - last["at"] >= REPORT_SPACING * last["seconds"]:
            start = time.monotonic()
            write_report(store)
            last.update(seconds=time.monotonic() - start, at=time.monotonic())
        bar.update(1)
        bar.set_postfix(accuracy=f"{acc:.3f}", loss=f"{loss:.3f}",
                        worst_epsilon=f"{auditor.ledger.worst_epsilon:.3g}")

    evaluate = make_evaluate_fn(dataset_of(cfg), cfg.model.name, on_result)

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        if server_round > 0:
            aggregate = {name: array.numpy() for name, array in arrays.items()}
            store.write_aggregate(done + server_round, aggregate)
        return evaluate(server_round, arrays)

    return evaluate_fn


def run_federation(
    grid: Grid | None, cfg: Config, run_dir: Path, *, resume: bool = False,
    opened: tuple[AuditStore, int] | None = None, sign_key: Ed25519PrivateKey | None = None,
) -> dict[str, Any]:
    """Train the audited strategy on ``grid`` until ``cfg.rounds`` rounds are complete.

    Returns the report (also in ``run_dir/report.json``). ``grid`` may be None when a resumed
    run has no round left to train.

    ``opened`` is the ``(store, completed rounds)`` of :func:`open_run` when the caller opened
    the run (and took its writer lock) itself, before starting anything costly. A
    ``mechanism.target_epsilon`` is calibrated before the store opens
    (:func:`fedpriv.calibration.calibrate_target`; a no-op on a config already resolved).
    ``sign_key`` signs the final chain head (:func:`close_run`).
    """
    cfg = calibrate_target(cfg)
    store, done = opened or open_run(cfg, run_dir, resume)
    status, error = "failed", None
    bar = tqdm(total=cfg.rounds, initial=done, desc="rounds", unit="round", dynamic_ncols=True)
    try:
        if done < cfg.rounds:
            if grid is None:
                raise ValueError(f"{cfg.rounds - done} rounds left to train but no grid")
            _train(grid, cfg, store, done, bar)
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        bar.close()
        report = close_run(store, status, error, sign_key)
    return report


def close_run(
    store: AuditStore, status: str, error: str | None,
    sign_key: Ed25519PrivateKey | None = None,
) -> dict[str, Any]:
    """Mark the run's status, sign the final chain head with ``sign_key`` (when given), write
    the report (with the store's integrity check) and close the store; returns the report."""
    store.mark_status(status, error)
    if sign_key is not None:
        sign_head(store, sign_key)
    report = write_report(store, problems=verify(store.run_dir, hashes=False))
    store.close()
    return report


def _server_keys(cfg: Config) -> dict[str, Any]:
    """What every message tells fedpriv's ClientApp (docs/protocol.md): the run's validated
    config and the protocol version. The train config adds ``lr`` (``train.lr``), the key
    Flower's quickstart ClientApps read their learning rate from, so a stock client trains."""
    return {CONFIG_KEY: cfg.to_json(), PROTOCOL_KEY: PROTOCOL_VERSION}


@contextmanager
def _setup_frozen() -> Iterator[None]:
    """Leave what exists before round 1 (the data set, the model, torch's and Flower's modules:
    most of the heap) out of the garbage collector's scans while the rounds run (``gc.freeze``;
    given back by ``gc.unfreeze`` when they end). Without it the collector's full passes walk
    that heap again and again while the ledger grows (measured in process, 1,000 clients
    audited, rounds 2–4: 0.084 ms per reply, 0.032 ms with it). Nothing is leaked: a frozen
    object is still freed when its last reference goes, and cycles among frozen objects are
    collected after the run."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _train(grid: Grid, cfg: Config, store: AuditStore, done: int, bar: tqdm) -> None:
    auditor = AuditPipeline(cfg.audit, store, dataset_of(cfg), model=cfg.model.name,
                            num_clients=cfg.data.num_clients, seed=cfg.seed, device=cfg.device,
                            train=cfg.train, config=cfg, weighting=cfg.strategy.weighting,
                            weight_cap=cfg.strategy.weight_cap)
    arrays = _start_arrays(cfg, store, done)
    dim = sum(a.size for a in arrays.to_numpy_ndarrays())
    check_release_size(cfg.audit, cfg.train.local_steps, dim)  # deployments: before round 1
    if done:
        auditor.restore(dim=dim)
    with _setup_frozen():
        _strategy(cfg, auditor, done).start(
            grid=grid,
            initial_arrays=arrays,
            num_rounds=cfg.rounds - done,
            timeout=cfg.strategy.round_timeout,
            train_config=ConfigRecord({**_server_keys(cfg), "lr": cfg.train.lr}),
            evaluate_config=ConfigRecord(_server_keys(cfg)),
            evaluate_fn=_evaluate_fn(cfg, store, auditor, done, bar),
        )
