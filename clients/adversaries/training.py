"""Adversaries that train otherwise than they declare (docs/trust.md §3).

* ``under-noise`` — noise scale × ``factor`` (κ / ``factor`` for the VMF), declares the
  configured mechanism; ``weak-under-noise`` the same at ``factor`` 0.3, the cheat a multi-step
  norm test has little power against (issue 25: noise × 0.3 at 20 local steps, actual ε 151
  for 11 reported);
* ``no-noise`` — clips, adds no noise (mechanism ``clip``), declares the configured mechanism;
* ``vmf-kappa`` — trains at κ × ``factor``, declares κ (a VMF test of the released norm alone
  cannot see it);
* ``declare-lr`` — trains at the configured lr with the noise × ``factor`` and declares
  lr × ``factor``: the server, dividing by the declared lr, sees the declared noise;
* ``declare-fewer-steps`` — trains ``factor`` × the configured local steps, declares the
  configured number (the ε of one step reported for ``factor`` steps);
* ``declare-optimizer`` — adds no noise and declares Adam in an SGD run (AdamW in an Adam run):
  an optimiser whose release the server cannot recover switches its test off.
"""

from __future__ import annotations

from flwr.app import Message

from clients.adversaries.base import (
    Turn,
    behaviour,
    declare_configured,
    report_of,
    with_config,
    with_mechanism,
    with_noise_times,
)


def _under_noise(turn: Turn) -> None:
    with_noise_times(turn, turn.factor)


def _no_noise(turn: Turn) -> None:
    with_mechanism(turn, "clip", {})


def _vmf_kappa(turn: Turn) -> None:
    with_noise_times(turn, 1.0 / turn.factor)  # κ / (1 / factor) = κ × factor


def _declare_lr(turn: Turn, reply: Message) -> None:
    declare_configured(turn, reply)
    report_of(reply)["lr"] = turn.cfg.train.lr * turn.factor


def _more_steps(turn: Turn) -> None:
    steps = turn.cfg.train.local_steps * int(turn.factor)

    def edit(raw: dict) -> None:
        raw["train"]["local_steps"] = steps

    with_config(turn, edit)


def _declare_fewer_steps(turn: Turn, reply: Message) -> None:
    report_of(reply)["steps"] = turn.cfg.train.local_steps


def _declare_optimizer(turn: Turn, reply: Message) -> None:
    declare_configured(turn, reply)
    report = report_of(reply)
    report["optimizer"] = "adamw" if turn.cfg.train.optimizer == "adam" else "adam"
    report["momentum"], report["nesterov"] = 0.0, False


behaviour("under-noise", before=_under_noise, after=declare_configured)
behaviour("weak-under-noise", before=_under_noise, after=declare_configured)
behaviour("no-noise", before=_no_noise, after=declare_configured)
behaviour("vmf-kappa", before=_vmf_kappa, after=declare_configured)
behaviour("declare-lr", before=_under_noise, after=_declare_lr)
behaviour("declare-fewer-steps", before=_more_steps, after=_declare_fewer_steps)
behaviour("declare-optimizer", before=_no_noise, after=_declare_optimizer)
