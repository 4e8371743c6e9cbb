"""Run a fedpriv config as a Flower simulation on the Ray backend.

``flwr.simulation.run_simulation`` is deprecated in Flower 1.41 in favour of ``flwr run``
against a simulation SuperLink, but it is the only in-process route that lets a command-line
tool pass a validated config object and get the report back without a detached SuperLink; it
is kept behind :func:`simulate` so that changing route later touches one function.

:func:`check_runnable` runs first, in the calling process: whatever would fail inside the
Ray actors or the ServerApp thread (missing data files, a mechanism that does not fit the
model, an accountant that cannot account the run) is refused before Ray starts. An exception
raised by the ServerApp thread is re-raised to the caller (an ``InputError`` stays one). An
interrupt (Ctrl-C, SIGTERM) reaches the ServerApp thread too, which then ends the run as
``interrupted`` (:func:`_run_on_ray`, docs/reliability.md "Ctrl-C and SIGTERM").
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import shlex
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedpriv.config import Config
from fedpriv.errors import InputError
from fedpriv.seeding import REPRODUCIBLE_NOISE_ENV
from workflows.config import config_from_dict

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from flwr.clientapp import ClientApp

    from fedpriv.accounting import Release
    from fedpriv.mechanisms import Mechanism

__all__ = ["CLIENT_APP", "check_runnable", "completed_rounds", "load_client_app", "simulate"]

CLIENT_APP = "clients.client_app:app"
"""The ClientApp by its import string, as ``[tool.flwr.app.components]`` names it for
``flwr run``: the server side never imports the client, only this composition root loads it."""

SIMULATED_CLIENTS_ENV = {REPRODUCIBLE_NOISE_ENV: "1"}
"""What the simulation's client processes (its Ray workers) have in their environment: their
batches and noise come from the run seed's stream (:func:`fedpriv.seeding.client_noise_seed`),
so that a run is reproducible from its config. A deployment's clients keep theirs secret."""

FLOWER_ENV = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "RAY_DEDUP_LOGS": "0",
    # Actors ask Ray for no GPU; with this, Ray leaves CUDA_VISIBLE_DEVICES alone for them
    # (and does not warn), so clients with device = "cuda"/"auto" share the machine's GPUs.
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
}


def _backend_config(cfg: Config) -> dict[str, Any]:
    """Flower's Ray backend config: a private Ray sized by ``simulation.ray_cpus``, or the
    running cluster at ``simulation.ray_address`` (whose resources are the cluster's)."""
    sim = cfg.simulation
    init: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if sim.ray_address:
        init["address"] = sim.ray_address
    else:  # always a private Ray: never attach to a cluster (stale or not) found on the machine
        init.update(address="local", num_cpus=sim.ray_cpus, num_gpus=0, include_dashboard=False)
    return {
        "client_resources": {"num_cpus": sim.client_cpus, "num_gpus": 0.0},
        "init_args": init,
    }


RAY_JOIN_TIMEOUT = 10.0
"""Seconds to wait for a Ray cluster named by ``simulation.ray_address`` to answer."""


def ray_address_file() -> Path:
    """The file in which ``ray start`` leaves its cluster's address for ``ray.init("auto")``:
    ``ray/ray_current_cluster`` under ``$RAY_TMPDIR``, else ``$TMPDIR`` on Linux, else ``/tmp``
    (Ray 2.55, ``ray/_common/utils.py``: ``get_default_system_temp_dir``)."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    else:
        base = "/tmp"
    return Path(base) / "ray" / "ray_current_cluster"


def check_ray_address(address: str, timeout: float = RAY_JOIN_TIMEOUT) -> None:
    """Refuse a ``simulation.ray_address`` that does not answer within ``timeout`` seconds.

    ``"auto"`` is resolved as Ray resolves it: ``$RAY_ADDRESS`` when set, else the address in
    :func:`ray_address_file` (which a killed cluster leaves behind, naming a dead head:
    ``ray.init`` would then wait forever; and without the file Ray's "auto" joins any Ray
    instance running on the machine, another user's private one included). A ``ray://``
    client address is checked at its host and port the same way.
    """
    import socket

    key = "simulation.ray_address"
    target = address
    if address == "auto":
        current = ray_address_file()
        target = os.environ.get("RAY_ADDRESS") or ""
        if not target and not current.is_file():
            raise InputError(key, address, "an address of a running Ray cluster (no cluster "
                             f"found: {current} does not exist); leave it empty for a private Ray")
        target = target or current.read_text().strip()
    host, _, port = target.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise InputError(key, address, f"a Ray cluster that answers within {timeout:g} s "
                         f"({target}: {exc}); leave it empty for a private Ray") from None


def check_runnable(cfg: Config) -> None:
    """Check in this process, before Ray starts, what would otherwise fail inside it.

    The device exists here (``device = "cuda"`` needs CUDA), the attack names are registered,
    the data set loads (a torchvision set's files are under
    ``data.root``), the partition gives every client at least one record, the model builds,
    every client's mechanism fits the model's layers (``clip_per_layer``), steps mode's
    releases fit a reply (``audit.release``), and — with auditing
    on — the accountant can account each distinct mechanism's whole run (``rounds ×
    local_steps`` releases) and, with canaries, a canary's round (the model holds as many
    coordinates as coordinate canaries).

    Raises
    ------
    InputError
        Naming the config key at fault.
    """
    from attacks.registry import check_attack_names
    from fedpriv.audit.config import check_release_size
    from fedpriv.data import client_sizes
    from fedpriv.devices import resolve_device
    from fedpriv.models import build_model
    from strategies.server_run import dataset_of

    resolve_device(cfg.device)
    check_attack_names(cfg.audit.attacks, "audit.attacks")
    check_attack_names([cfg.sweep.attack], "sweep.attack")
    if cfg.simulation.ray_address:
        check_ray_address(cfg.simulation.ray_address)
    dataset = dataset_of(cfg)
    model = build_model(cfg.model.name, dataset.input_shape, dataset.num_classes)
    layer_sizes = [p.numel() for p in model.parameters()]
    check_release_size(cfg.audit, cfg.train.local_steps, sum(layer_sizes))
    _check_mechanisms(cfg, client_sizes(cfg.data, dataset.train_y.numpy(), cfg.seed),
                      layer_sizes)


def _check_mechanisms(cfg: Config, sizes: list[int], layer_sizes: list[int]) -> None:
    """Each distinct mechanism fits the model and, with auditing on or an ε budget set, can be
    accounted over the whole run (``rounds × local_steps`` releases at the client's rate):
    once per distinct (mechanism, rate), not once per client."""
    from fedpriv.accounting import ClientAccountant
    from fedpriv.accounting.sampling import level_relation, sampled_population
    from fedpriv.canaries import canary_epsilon, round_design
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.protocol import sampling_rate

    seen: set[str] = set()
    dim = sum(layer_sizes)
    steps = cfg.rounds * cfg.train.local_steps
    for client_id, n in enumerate(sizes):
        name, params = cfg.mechanism.for_client(client_id)
        mech = build_mechanism(name, params)
        q = sampling_rate(n, cfg.train.batch_size)
        key = repr((mech.name, sorted(mech.params().items()), q))
        if key in seen:
            continue
        seen.add(key)
        mech.check_layers(layer_sizes)
        release = mech.release(dim)
        with _accountable(cfg, client_id, mech, release, q, steps):
            if cfg.audit.enabled or cfg.mechanism.budget_for(client_id) is not None:
                accountant = ClientAccountant(cfg.audit.accountant, neighbouring=level_relation(
                    mech.level, cfg.audit.neighbouring))
                accountant.record(release, q, steps,
                                  sampled_population(cfg.train.sampling, mech.level, q, n))
                accountant.result(cfg.audit.delta)
            s = cfg.audit.canaries
            if round_design(cfg.seed, client_id, 1, dim, enabled=s.enabled, count=s.count,
                            kind=s.kind, sensitivity=mech.sensitivity, norm_ord=mech.norm_ord,
                            additive=mech.additive) is not None:
                canary_epsilon(release, cfg.train.local_steps, cfg.audit.delta,
                               cfg.audit.accountant)


#: The accountants' own argument names → the config keys they come from.
_ACCOUNTED_KEYS = {"sample_rate": "train.batch_size", "steps": "rounds", "delta": "audit.delta"}


@contextmanager
def _accountable(
    cfg: Config, client_id: int, mech: Mechanism, release: Release, q: float, steps: int
) -> Iterator[None]:
    """Turn a failure of the accountant on this client's run into an InputError naming the
    config key: the accountant's own range checks name its arguments (``noise_multiplier``,
    ``sample_rate``, ``steps``), and dp-accounting's arithmetic fails outside its range with
    ZeroDivisionError, OverflowError or IndexError rather than an error of its own."""
    try:
        yield
    except (ArithmeticError, LookupError, ValueError) as exc:
        reason = exc.allowed if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
        name = getattr(release, "parameter_name", None)
        arg = exc.key if isinstance(exc, InputError) else None
        if arg in _ACCOUNTED_KEYS:
            key = _ACCOUNTED_KEYS[arg]
            value = functools.reduce(getattr, key.split("."), cfg)
        elif name in mech.params():
            key, value = cfg.mechanism.source_key(client_id, name), mech.params()[name]
        else:
            key, value = cfg.mechanism.source_key(client_id, "name"), mech.name
        raise InputError(key, value, (
            f"a setting the {cfg.audit.accountant} accountant can account over {steps:,} "
            f"releases at q = {q:.4g} (rounds x train.local_steps releases; client {client_id}): "
            f"{reason}")) from None


def completed_rounds(run_dir: Path) -> tuple[Config, int]:
    """The stored configuration of a run directory and how many rounds it completed.

    Raises
    ------
    InputError
        No store in ``run_dir``, or a damaged one (:class:`fedpriv.audit.StoreError`).
    """
    from fedpriv.audit import AuditStore

    with AuditStore.open(run_dir, readonly=True) as store:
        cfg = config_from_dict(store.run_info()["config"])
        return cfg, store.last_completed_round() or 0


def load_client_app(ref: str = CLIENT_APP) -> ClientApp:
    """The ClientApp named by ``ref`` (``"module:attribute"``), imported as Flower imports it.

    Flower's public ``run_simulation`` takes a ClientApp object, not its import string (only
    its private machinery takes ``client_app_attr``), so the string is resolved here.
    """
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def simulate(
    cfg: Config, run_dir: Path, verbose: bool = False, *, resume: bool = False,
    sign_key: Ed25519PrivateKey | None = None,
) -> dict[str, Any]:
    """Run the federation of ``cfg`` with ``cfg.data.num_clients`` virtual SuperNodes.

    With ``resume`` the run in ``run_dir`` continues after its last completed round
    (:func:`strategies.server_run.run_federation`); Ray is not started when none is left.
    Returns the report (also written to ``run_dir/report.json``). A
    ``mechanism.target_epsilon`` is calibrated first (:mod:`fedpriv.calibration`): the run
    uses, stores and reports the resolved config. With ``sign_key`` the run's final chain head
    is signed (:func:`fedpriv.audit.signing.sign_head`).

    Raises
    ------
    InputError
        From the calibration or :func:`check_runnable` (before Ray starts), or raised by the
        ServerApp.
    workflows.interrupts.Interrupted
        On ``KeyboardInterrupt`` (SIGINT, SIGTERM: :mod:`workflows.interrupts`), once the run
        is marked ``interrupted`` and its report written; it names the resuming command.
    """
    from fedpriv.calibration import calibrate_target
    from strategies.server_run import open_run, run_federation

    cfg = calibrate_target(cfg)  # mechanism.target_epsilon: the noise, before anything else
    check_runnable(cfg)
    opened = open_run(cfg, run_dir, resume)  # the store and its writer lock, before Ray starts
    if opened[1] >= cfg.rounds:
        return run_federation(None, cfg, run_dir, resume=True, opened=opened, sign_key=sign_key)
    return _run_on_ray(cfg, run_dir, verbose, opened, sign_key)


def _run_on_ray(
    cfg: Config, run_dir: Path, verbose: bool, opened: tuple[Any, int],
    sign_key: Ed25519PrivateKey | None,
) -> dict[str, Any]:
    """Run the ServerApp on Flower's simulation engine, on a Ray this process starts.

    On :class:`KeyboardInterrupt` (Ctrl-C, or :mod:`workflows.interrupts`' first SIGINT or
    SIGTERM) in the main thread, where Flower's engine runs: the engine stops and kills its
    Ray actors on the way out, and the ServerApp thread, whose pending replies will then never
    come, gives up at its next pull (:func:`workflows.flower_queue.stop_pulls`), marks the run
    ``interrupted`` and writes its report; once it has, :class:`workflows.interrupts.
    Interrupted` is raised, naming the command that resumes the run.
    """
    for key, value in FLOWER_ENV.items():
        os.environ.setdefault(key, value)
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from strategies.server_run import close_run, run_federation
    from workflows.flower_queue import indexed_message_queue, pace_pulls, stop_pulls
    from workflows.interrupts import Interrupted
    from workflows.ray_session import ray_session

    flwr = logging.getLogger("flwr")
    flwr.propagate = False  # Flower prints through its own handler: not again through the root's
    if not verbose:
        flwr.setLevel(logging.WARNING)
    result: dict[str, Any] = {}
    errors: list[BaseException] = []  # the ServerApp runs in a thread: keep what it raised
    server_app = ServerApp()
    stop, finished, lock = threading.Event(), threading.Event(), threading.Lock()
    started: list[bool] = []  # whether run_federation took over the store (it closes it)

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        with lock:
            if stop.is_set():
                return
            started.append(True)
        pace_pulls(grid, cfg.data.num_clients)
        stop_pulls(grid, stop)
        try:
            result.update(run_federation(grid, cfg, run_dir, opened=opened, sign_key=sign_key))
        except KeyboardInterrupt:
            pass  # the run is marked interrupted; the main thread says so
        except BaseException as exc:
            errors.append(exc)
            raise
        finally:
            finished.set()

    backend = _backend_config(cfg)
    interrupted = False
    try:
        with ray_session(backend["init_args"], SIMULATED_CLIENTS_ENV), \
                warnings.catch_warnings(), \
                indexed_message_queue():  # O(N), not O(N²), per tick
            warnings.simplefilter("ignore", DeprecationWarning)
            run_simulation(
                server_app=server_app,
                client_app=load_client_app(),
                num_supernodes=cfg.data.num_clients,
                backend_name="ray",
                backend_config=backend,
                verbose_logging=verbose,
            )
    except KeyboardInterrupt:
        interrupted = True
        with lock:
            stop.set()
        if started:
            finished.wait()
    except Exception:
        if not errors:
            raise
    finally:
        if not started:  # Ray or Flower stopped before the ServerApp ran: release the run
            if interrupted:
                close_run(opened[0], "interrupted", None)
            else:
                store = opened[0]
                store.mark_status("failed", "the simulation engine stopped before the first round")
                store.close()
    if errors:
        raise errors[0]
    if interrupted and not result:
        raise Interrupted(f"fedpriv simulate --resume {shlex.quote(str(run_dir))}")
    if not result:
        raise RuntimeError("the simulation ended without a report (see the log above)")
    return result
