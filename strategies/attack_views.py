"""What the attacks see of an update: the server's view (:class:`attacks.view.ServerView`),
built from a reply's report (:func:`declared_view`) or, for a stock client's undeclared update,
from the run's ``[train]`` settings (:func:`undeclared_view`) — live and offline, so
``attacks/`` never reads the wire protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attacks.view import ServerView
from fedpriv.protocol import ClientReport
from fedpriv.training.config import TrainConfig, optimizer_settings

__all__ = ["declared_view", "undeclared_view"]


def declared_view(
    model: tuple[str, tuple[int, ...], int], global_params: Sequence[Any],
    update: Sequence[Any], report: ClientReport,
) -> ServerView:
    """The server's view of a declared update (a reply with its report), live and offline.

    Parameters
    ----------
    model
        ``(name, input_shape, num_classes)`` of the run's model.
    global_params
        The broadcast parameters θ of the update's round.
    update
        The client's update Δ (less any canaries' share), same order and shapes.
    report
        What the client declared (live, or read back from the audit store offline); the view
        keeps its ``lr``, ``batch_size``, ``local_steps`` and the mechanism's name and
        parameters.

    Returns
    -------
    ServerView
        What the attacks see of the update.
    """
    name, input_shape, num_classes = model
    return ServerView(
        model_name=name, input_shape=input_shape, num_classes=num_classes,
        global_params=global_params, update=update,
        learning_rate=float(report.lr), batch_size=float(report.batch_size),
        local_steps=int(report.local_steps), mechanism=report.mechanism.name,
        mechanism_params=report.mechanism.params(), optimizer=report.optimizer,
    )


def undeclared_view(
    model: tuple[str, tuple[int, ...], int], global_params: Sequence[Any],
    update: Sequence[Any], train: TrainConfig,
) -> ServerView:
    """The server's view of an undeclared update (a stock client's: no report), live and
    offline. The client's learning rate, steps and batch size are unknown; the run's
    ``[train]`` settings (optimiser included) are the server's only guess
    (docs/protocol.md), and the update is attacked as a pseudo-gradient."""
    name, input_shape, num_classes = model
    return ServerView(model_name=name, input_shape=input_shape, num_classes=num_classes,
                      global_params=global_params, update=update, learning_rate=train.lr,
                      local_steps=train.local_steps, batch_size=float(train.batch_size),
                      optimizer=optimizer_settings(train))
