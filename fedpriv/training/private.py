"""fedpriv's DP-SGD on your own model, loss and data: one round of private local training that
returns the :class:`~fedpriv.protocol.ClientReport` declaring it.

Where Opacus's ``PrivacyEngine.make_private`` wraps a model, an optimiser and a data loader,
:func:`private_train` takes the same three things and runs :func:`~fedpriv.training.dpsgd.
local_train` on them: it samples its own Poisson batches of expected size ``batch_size`` (as
Opacus's ``DPDataLoader`` replaces the loader's batching; the loader's own batches are only
read, once, into one tensor pair), hands each batch's per-example gradients of ``loss`` to the
mechanism, which clips and noises them, and steps the optimiser on the release. The report is
what the auditing server verifies the update against (:mod:`fedpriv.protocol`); put it in the
reply's ``meta`` ConfigRecord (``ClientReport.to_config``), beside the parameters and metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from fedpriv.errors import InputError
from fedpriv.gradients import Loss, cross_entropy
from fedpriv.protocol import ClientReport
from fedpriv.training.dpsgd import LocalResult, local_train, sampling_rate
from fedpriv.training.optimizers import LocalOptimizer

if TYPE_CHECKING:
    from fedpriv.mechanisms import Mechanism

__all__ = ["PrivateRound", "private_train"]


@dataclass(frozen=True)
class PrivateRound:
    """One round of :func:`private_train`: what it did and what it declares."""

    result: LocalResult
    report: ClientReport


def _tensors(data: Iterable | tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """``(x, y)`` from a tensor pair, or every ``(x, y)`` batch of a loader concatenated."""
    if isinstance(data, tuple) and len(data) == 2 and all(torch.is_tensor(t) for t in data):
        return data
    xs, ys = [], []
    for batch in data:
        if not (isinstance(batch, list | tuple) and len(batch) == 2):
            raise InputError("data", type(batch).__name__, "a loader of (inputs, targets) batches "
                             "or an (x, y) tensor pair")
        xs.append(batch[0])
        ys.append(batch[1])
    if not xs:
        raise InputError("data", "an empty loader", "at least one record")
    return torch.cat(xs), torch.cat(ys)


def private_train(
    model: nn.Module,
    data: Iterable | tuple[torch.Tensor, torch.Tensor],
    mechanism: Mechanism,
    *,
    lr: float,
    local_steps: int,
    batch_size: int,
    generator: torch.Generator,
    partition_id: int,
    server_round: int,
    loss: Loss = cross_entropy,
    optimizer: LocalOptimizer | None = None,
    sampling: str = "poisson",
    keep_releases: bool = False,
) -> PrivateRound:
    """Run ``local_steps`` DP-SGD steps of ``mechanism`` on ``model`` (in place) and declare them.

    Parameters
    ----------
    model
        Any torch model. All-linear models take the fast rank-one route, others
        ``torch.func`` per-example gradients (:func:`fedpriv.gradients.gradient_source`).
    data
        A data loader yielding ``(inputs, targets)`` batches (read once), or an ``(x, y)`` pair.
    mechanism
        The noise mechanism, built (``fedpriv.mechanisms.build_mechanism("gaussian",
        {"noise_multiplier": 1.0, "clip_norm": 1.0})``); the report declares this object.
    lr, local_steps, batch_size
        Learning rate η, the number of noisy releases, the expected batch size ``L``.
    generator
        The source of the batches and the noise: ``fedpriv.seeding.make_generator`` with the
        client's own seed (``client_noise_seed``: None, fresh entropy, unless its side opted
        in) — a seed the server knows gives it the noise and the batches.
    partition_id, server_round
        Who the client is and the round it trains in, as the server's message says.
    loss
        The per-example loss ``(outputs, targets) -> (B,)`` (cross-entropy by default).
    optimizer
        The local optimiser stepping on each release (plain SGD by default), declared too.
    sampling
        ``"poisson"`` (what the accounting assumes) or ``"fixed"``.
    keep_releases
        Keep every step's release in ``result.releases``, for a server that asks for them
        (``audit.release = "steps"``): send them as the reply's ``step-releases`` ArrayRecord
        (``clients.step_releases.steps_record``; docs/protocol.md).
    """
    x, y = _tensors(data)
    optimizer = optimizer or LocalOptimizer()
    n = int(x.shape[0])
    result = local_train(model, x, y, mechanism, lr=lr, local_steps=local_steps,
                         batch_size=batch_size, sampling=sampling, generator=generator,
                         optimizer=optimizer, loss=loss, keep_releases=keep_releases)
    report = ClientReport(
        partition_id=partition_id, server_round=server_round, local_examples=n,
        local_steps=local_steps, lr=lr, batch_size=float(batch_size), sampling=sampling,
        sample_rate=sampling_rate(n, batch_size), mechanism=mechanism,
        optimizer=optimizer.settings,
    )
    return PrivateRound(result, report)
