"""The Flower ClientApp: one private local update per round.

The server ships the validated fedpriv config (JSON) in every train message, so simulation and
deployment behave the same (the message keys and the reply's records: docs/protocol.md; a
message without the config fails with :class:`fedpriv.protocol.ProtocolError` saying so); a
client validates it once per process (``Config.from_json`` keeps the result). What does not
change between messages is built once per process (a Ray actor serves many clients): the
data set and its partition (:mod:`clients.local_data`) and the model, into which each message
loads its parameters. Training runs on the config's ``device``
(:mod:`fedpriv.devices`). The reply carries

* ``arrays`` — the new local parameters;
* ``metrics`` (MetricRecord, averaged by Flower) — ``num-examples``, ``train-loss``;
* ``step-releases`` (ArrayRecord), only with ``audit.release = "steps"`` — every local step's
  release, stacked per parameter (:mod:`clients.step_releases`), which the server checks and
  removes before aggregating;
* ``meta`` (ConfigRecord, never averaged) — the :class:`fedpriv.protocol.ClientReport` (with its
  protocol version): partition id, steps, learning rate, expected batch size, sampling rate,
  the declared mechanism (the object it trains with) and the local optimiser's settings; the
  record ids of each batch only when the simulation-only ground-truth oracle is on
  (``audit.ground_truth``), with, when they came from the run seed's stream on the CPU, that
  stream (:data:`fedpriv.seeding.SEEDED_NOISE`); the client's ε budget, if it has one.

The batches and the noise are the client's secret: fresh operating-system entropy every round,
unless the node opts in to the run seed's stream, which the server can re-draw
(:func:`fedpriv.seeding.client_noise_seed`: the node config's ``fedpriv-reproducible-noise``, or
``FEDPRIV_REPRODUCIBLE_NOISE=1``, which ``fedpriv simulate`` sets for its clients). Fresh
entropy per message rather than one secret per node: a server that sends a round twice, with
two models, would otherwise get the same noise twice and cancel it.

The local optimiser (``train.optimizer``: SGD with optional momentum and weight decay, Adam,
or AdamW) steps on each privatised gradient as Opacus does and is created afresh every round
(:mod:`fedpriv.training.optimizers`).

A client with an ε budget (``mechanism.epsilon_budget``) that the round would exceed does not
train: its reply is the report alone, saying why (``declined``); see ``clients/budget.py``.

With a client-level mechanism (``mechanism.name = "client-gaussian"``, privacy-math.md §11) the
local steps are plain SGD and the whole update is clipped and noised once
(:func:`clients.client_dp.privatize_arrays`, as the client mod does for any ClientApp).

A strategy that asks for a proximal term (FedProx sends ``proximal-mu``) gets it in training.
With ``[audit.canaries]`` on, the client adds the round's canaries, derived from the run's seed
as the server derives them (:func:`fedpriv.canaries.round_design`), to every step's clipped sum.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from clients.adversaries import adversary_mod
from clients.budget import budget_check, record_releases, releases_so_far
from clients.client_dp import privatize_arrays
from clients.local_data import client_data
from clients.release_hook import releasing
from clients.step_releases import steps_record
from fedpriv.canaries import canary_sum, round_design
from fedpriv.config import Config
from fedpriv.devices import resolve_device
from fedpriv.instructions import instructed_report
from fedpriv.mechanisms import Mechanism
from fedpriv.models import build_model
from fedpriv.protocol import REPORT_RECORD, STEPS_RECORD, GroundTruthOracle, server_config
from fedpriv.seeding import SEEDED_NOISE, client_noise_seed, make_generator, update_generator
from fedpriv.training import local_optimizer, local_train

__all__ = ["app"]

torch.set_num_threads(1)  # one core per client actor; Ray schedules actors across cores
app = ClientApp(mods=[adversary_mod])  # passes honest clients through: see clients/adversaries.py


def _partition(context: Context) -> tuple[int, int]:
    return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])


@lru_cache(maxsize=8)
def _module(name: str, input_shape: tuple[int, ...], device: torch.device) -> torch.nn.Module:
    """One model per process, architecture and device: every message loads its parameters."""
    return build_model(name, input_shape).to(device)


def _local(
    cfg: Config, msg: Message, pid: int, num_parts: int
) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The received model and this client's ``(x, y)`` on the run's device
    (:func:`fedpriv.devices.resolve_device`), and the record ids (on the CPU)."""
    device = resolve_device(cfg.device)
    x, y, ids = client_data(cfg.data, cfg.seed, pid, num_parts)
    model = _module(cfg.model.name, tuple(x.shape[1:]), device)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    return model, x.to(device), y.to(device), ids


def _canaries(
    cfg: Config, mechanism: Mechanism, pid: int, server_round: int, dim: int,
    like: torch.Tensor,
) -> torch.Tensor | None:
    """The in-canary sum this client adds to every step of the round (on ``like``'s device
    and in its dtype, once, not per step), or None."""
    s = cfg.audit.canaries
    design = round_design(cfg.seed, pid, server_round, dim, enabled=s.enabled, count=s.count,
                          kind=s.kind, sensitivity=mechanism.sensitivity,
                          norm_ord=mechanism.norm_ord, additive=mechanism.additive)
    if design is None:
        return None
    return torch.from_numpy(canary_sum(design)).to(device=like.device, dtype=like.dtype)


@app.train()
def train(msg: Message, context: Context) -> Message:
    """One round of local DP-SGD with this client's mechanism, or a reply declining it when the
    round would take the client over its ε budget (``clients/budget.py``)."""
    config = msg.content.config_records.get("config")
    cfg = Config.from_json(server_config(config, "train"))
    server_round = int(config["server-round"])
    pid, num_parts = _partition(context)
    model, x, y, ids = _local(cfg, msg, pid, num_parts)
    n = int(x.shape[0])
    # the settings the server sent, derived as the server derives what it expects of us
    report = instructed_report(cfg, pid, server_round, n, context.node_config)
    mechanism = report.mechanism
    optimizer = local_optimizer(cfg.train)
    dim = sum(p.numel() for p in model.parameters())
    released = releases_so_far(context, config, pid)
    check = budget_check(cfg.mechanism.budget_for(pid), mechanism, cfg.audit, released=released,
                         **report.release_sampling, steps=report.releases, dim=dim)
    if check is not None and not check.within:
        declined = replace(report, declined=check.reason())
        content = RecordDict({REPORT_RECORD: ConfigRecord(declined.to_config())})
        return Message(content=content, reply_to=msg)
    seed = client_noise_seed(cfg.seed, context.node_config)  # None: the client's secret
    generator = make_generator(seed, pid, server_round, device=x.device)
    # never a client-level mechanism's plain steps: those "releases" would be raw gradients
    steps_mode = cfg.audit.enabled and cfg.audit.release == "steps" and not report.client_level
    result = local_train(
        model, x, y, releasing(mechanism),  # an adversary's stand-in, else the mechanism
        lr=report.lr, local_steps=report.local_steps, batch_size=cfg.train.batch_size,
        sampling=report.sampling, generator=generator, record_ids=ids.tolist(),
        proximal_mu=float(config.get("proximal-mu", 0.0)),
        optimizer=optimizer,
        canaries=_canaries(cfg, mechanism, pid, server_round, dim,
                           next(model.parameters())),
        keep_releases=steps_mode,
    )
    record_releases(context, released + report.releases)
    oracle = cfg.audit.enabled and cfg.audit.ground_truth
    if oracle:
        # from the run seed's CPU stream, the batches and the noise: the server may re-draw them
        seeded = SEEDED_NOISE if seed is not None and generator.device.type == "cpu" else None
        report = replace(report, oracle=GroundTruthOracle(tuple(map(tuple, result.batch_indices)),
                                                          noise_stream=seeded))
    arrays = ArrayRecord(model.state_dict())
    if report.client_level:  # plain local steps above; now the update is privatised
        arrays = privatize_arrays(mechanism, msg.content["arrays"], arrays,
                                  update_generator(seed, pid, server_round))
    content = RecordDict({
        "arrays": arrays,
        "metrics": MetricRecord({"num-examples": n, "train-loss": result.loss}),
        REPORT_RECORD: ConfigRecord(report.to_config()),
    })
    if steps_mode:  # every step's release beside the update (clients/step_releases.py)
        content[STEPS_RECORD] = steps_record(model, result.releases)
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Loss and accuracy of the received model on this client's local data."""
    cfg = Config.from_json(server_config(msg.content.config_records.get("config"), "evaluate"))
    model, x, y, _ = _local(cfg, msg, *_partition(context))
    with torch.no_grad():
        logits = model(x)
        loss = float(torch.nn.functional.cross_entropy(logits, y))
        acc = float((logits.argmax(1) == y).float().mean())
    metrics = MetricRecord({"num-examples": int(x.shape[0]), "eval-loss": loss, "eval-acc": acc})
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)
