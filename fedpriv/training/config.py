"""``[train]``: the settings of local DP-SGD on each client (:mod:`fedpriv.training.dpsgd`)."""

from __future__ import annotations

from dataclasses import dataclass

from fedpriv.errors import InputError
from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.protocol import MAX_LOCAL_STEPS, OPTIMIZERS, optimizer_conflict
from fedpriv.schema import bounded_count, one_of, rule

__all__ = ["LR_RANGE", "TrainConfig", "check_optimizer", "optimizer_settings"]


#: Learning rates a run takes: the step ``η·u`` is taken in float32 (largest 3.4e38,
#: smallest normal 1.2e-38), where ``lr = 1e308`` is infinite and ``lr = 1e-320`` is 0.
LR_RANGE = (1e-12, 1e6)


@dataclass(frozen=True)
class TrainConfig:
    """``[train]``: local DP-SGD on each client (the optimiser it describes:
    :func:`fedpriv.training.local_optimizer`)."""

    batch_size: int = rule(*bounded_count(1, 1_000_000), default=16,
                           doc="L, the expected batch size of a local step (q = min(L, n)/n).")
    lr: float = rule(f"a number in [{LR_RANGE[0]:g}, {LR_RANGE[1]:g}] (steps in float32 that "
                     "neither overflow nor vanish)", lambda v: LR_RANGE[0] <= v <= LR_RANGE[1],
                     default=0.5, doc="The local learning rate.")
    local_steps: int = rule(f"an integer in [1, {MAX_LOCAL_STEPS:,}]",
                            lambda v: 1 <= v <= MAX_LOCAL_STEPS, default=1,
                            doc="Noisy local steps per round (each one release).")
    sampling: str = rule(*one_of("poisson", "fixed"), default="poisson",
                         doc="Poisson batches at rate q, or fixed-size batches of min(L, n) "
                             "records drawn without replacement.")
    fraction_train: float = rule("a number in (0, 1]", lambda v: 0 < v <= 1, default=1.0,
                                 doc="The share of clients the server samples each round.")
    optimizer: str = rule(*one_of(*OPTIMIZERS), default="sgd",
                          doc="The local optimiser applied to each noisy release.")
    momentum: float = rule("a number in [0, 1) (SGD only)", lambda v: 0 <= v < 1, default=0.0,
                           doc="SGD's momentum.")
    nesterov: bool = rule("true or false (SGD with momentum > 0 only)", default=False,
                          doc="Whether SGD's momentum is Nesterov's.")
    weight_decay: float = rule(
        "a number >= 0 (added to the released gradient, as Opacus does; adamw: decoupled)",
        lambda v: v >= 0, default=0.0, doc="The optimiser's weight decay.",
    )
    betas: list[float] = rule(
        "two numbers in [0, 1): Adam's and AdamW's (beta1, beta2)",
        lambda v: len(v) == 2 and all(0 <= b < 1 for b in v),
        default_factory=lambda: [0.9, 0.999],
    )


def check_optimizer(train: TrainConfig) -> None:
    """Settings that do not fit the chosen optimiser, named by key.

    Raises
    ------
    InputError
        Naming ``train.momentum`` or ``train.nesterov``
        (:func:`fedpriv.protocol.optimizer_conflict`).
    """
    bad = optimizer_conflict(train.optimizer, train.momentum, train.nesterov)
    if bad is None:
        return
    raise InputError(f"train.{bad}", getattr(train, bad),
                     f"unset with train.optimizer = {train.optimizer!r} (SGD's setting; "
                     "Adam's moments are set by train.betas)" if train.optimizer != "sgd"
                     else "false unless train.momentum > 0")


def optimizer_settings(train: TrainConfig) -> OptimizerSettings:
    """What a client declares of the ``[train]`` optimiser (everything but Adam's betas, which
    act after the release): the ClientApp's optimiser (:func:`fedpriv.training.
    local_optimizer`) and the server's instructions (:mod:`fedpriv.instructions`) both read it."""
    return OptimizerSettings(train.optimizer, train.momentum, train.nesterov, train.weight_decay)
