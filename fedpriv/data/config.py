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

    name: str = rule(*one_of("digits", "mnist", "fashion-mnist", "cifar10"), default="digits",
                     doc="The data set.")
    root: str = rule("a directory path", default="data",
                     doc="Where the data set's files are (torchvision's layout or flat IDX).")
    download: bool = rule("true or false", default=False,
                          doc="Whether torchvision may download a missing data set.")
    num_clients: int = rule(*bounded_count(1, MAX_CLIENTS), default=10,
                            doc="Clients (partitions of the training set).")
    partition: str = rule(*one_of("iid", "dirichlet"), default="iid",
                          doc="How the training set is split across clients.")
    dirichlet_alpha: float = rule("a number > 0", positive, default=0.5,
                                  doc="The Dirichlet concentration of a non-IID split: the "
                                      "smaller, the more skewed.")
    test_fraction: float = rule(
        "a number in (0, 1)", lambda v: 0 < v < 1, default=0.2,
        doc="digits only: the share held out for testing (torchvision sets use their official "
            "test split).",
    )
