"""``[data]``: which data set, where it lives, and how it is split across clients."""

from __future__ import annotations

from dataclasses import dataclass

from fedpriv.schema import bounded_count, one_of, positive, rule

__all__ = ["DataConfig", "MAX_CLIENTS"]

#: Most clients a run may have: client ids lie in ``[0, MAX_CLIENTS - 1]``.
MAX_CLIENTS = 1_000_000


@dataclass(frozen=True)
class DataConfig:
    """``[data]``: which data set, where it lives, and how it is split across clients."""

    name: str = rule(*one_of("digits", "mnist", "fashion-mnist", "cifar10"), default="digits")
    root: str = rule("a directory path", default="data")
    download: bool = rule("true or false", default=False)
    num_clients: int = rule(*bounded_count(1, MAX_CLIENTS), default=10)
    partition: str = rule(*one_of("iid", "dirichlet"), default="iid")
    dirichlet_alpha: float = rule("a number > 0", positive, default=0.5)
    test_fraction: float = rule(
        "a number in (0, 1)", lambda v: 0 < v < 1, default=0.2
    )  # digits only: torchvision sets use their official test split
