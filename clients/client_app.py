"""The Flower ClientApp: one private local update per round.

The server ships the validated fedpriv config (JSON) in every train message, so simulation and
deployment behave the same; a client validates it once per process (``Config.from_json`` keeps
the result). The reply carries

* ``arrays`` — the new local parameters;
* ``metrics`` (MetricRecord, averaged by Flower) — ``num-examples``, ``train-loss``;
* ``meta`` (ConfigRecord, never averaged) — the :class:`fedpriv.protocol.ClientReport`: partition
  id, steps, learning rate, expected batch size, sampling rate, declared mechanism and its
  public parameters; the record ids of each batch only when the simulation-only ground-truth
  oracle is on (``audit.ground_truth``); the client's ε budget, if it has one.

A client with an ε budget (``mechanism.epsilon_budget``) that the round would exceed does not
train: its reply is the report alone, saying why (``declined``); see ``clients/budget.py``.

A strategy that asks for a proximal term (FedProx sends ``proximal-mu``) gets it in training.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from clients.adversaries import adversary_mod
from clients.budget import budget_check, record_releases, releases_so_far
from clients.local_data import client_data
from clients.node_mechanism import mechanism_for
from fedpriv.config import Config
from fedpriv.mechanisms import build_mechanism
from fedpriv.mechanisms.seeding import make_generator
from fedpriv.models import build_model
from fedpriv.protocol import REPORT_RECORD, ClientReport, GroundTruthOracle
from fedpriv.training import local_train, sampling_rate

__all__ = ["app"]

torch.set_num_threads(1)  # one core per client actor; Ray schedules actors across cores
app = ClientApp(mods=[adversary_mod])  # passes honest clients through: see clients/adversaries.py


def _partition(context: Context) -> tuple[int, int]:
    return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])


def _model(cfg: Config, msg: Message, input_shape: tuple[int, ...]) -> torch.nn.Module:
    model = build_model(cfg.model.name, input_shape)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    return model


@app.train()
def train(msg: Message, context: Context) -> Message:
    """One round of local DP-SGD with this client's mechanism, or a reply declining it when the
    round would take the client over its ε budget (``clients/budget.py``)."""
    config = msg.content["config"]
    cfg = Config.from_json(str(config["fedpriv-config"]))
    server_round = int(config["server-round"])
    pid, num_parts = _partition(context)
    x, y, ids = client_data(cfg.data, cfg.seed, pid, num_parts)
    name, params = mechanism_for(cfg, pid, context.node_config)
    mechanism = build_mechanism(name, params)
    model = _model(cfg, msg, tuple(x.shape[1:]))
    n = int(x.shape[0])
    report = ClientReport(
        partition_id=pid, server_round=server_round, local_examples=n,
        local_steps=cfg.train.local_steps, lr=cfg.train.lr,
        batch_size=float(cfg.train.batch_size), sampling=cfg.train.sampling,
        sample_rate=sampling_rate(n, cfg.train.batch_size), mechanism=mechanism.name,
        mechanism_params=mechanism.params(), epsilon_budget=cfg.mechanism.budget_for(pid),
    )
    released = releases_so_far(context, config, pid)
    check = budget_check(cfg, pid, mechanism, released=released, sample_rate=report.sample_rate,
                         dim=sum(p.numel() for p in model.parameters()))
    if check is not None and not check.within:
        declined = replace(report, declined=check.reason())
        content = RecordDict({REPORT_RECORD: ConfigRecord(declined.to_config())})
        return Message(content=content, reply_to=msg)
    result = local_train(
        model, x, y, mechanism,
        lr=cfg.train.lr, local_steps=cfg.train.local_steps, batch_size=cfg.train.batch_size,
        sampling=cfg.train.sampling, generator=make_generator(cfg.seed, pid, server_round),
        record_ids=ids.tolist(), proximal_mu=float(config.get("proximal-mu", 0.0)),
    )
    record_releases(context, released + result.steps)
    oracle = cfg.audit.enabled and cfg.audit.ground_truth
    report = replace(
        report, local_steps=result.steps, sample_rate=result.sample_rate,
        oracle=GroundTruthOracle(tuple(map(tuple, result.batch_indices))) if oracle else None,
    )
    content = RecordDict({
        "arrays": ArrayRecord(model.state_dict()),
        "metrics": MetricRecord({"num-examples": n, "train-loss": result.loss}),
        REPORT_RECORD: ConfigRecord(report.to_config()),
    })
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Loss and accuracy of the received model on this client's local data."""
    cfg = Config.from_json(str(msg.content["config"]["fedpriv-config"]))
    pid, num_parts = _partition(context)
    x, y, _ = client_data(cfg.data, cfg.seed, pid, num_parts)
    model = _model(cfg, msg, tuple(x.shape[1:]))
    with torch.no_grad():
        logits = model(x)
        loss = float(torch.nn.functional.cross_entropy(logits, y))
        acc = float((logits.argmax(1) == y).float().mean())
    metrics = MetricRecord({"num-examples": int(x.shape[0]), "eval-loss": loss, "eval-acc": acc})
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)
