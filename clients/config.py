"""``[[adversary]]``: clients that misbehave, and how (:mod:`clients.adversaries`).

Registered into the run's config (:func:`fedpriv.config.register_section`) when imported: the
ClientApp validates the tables it receives from the server, and ``fedpriv simulate`` before any
work starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedpriv.config import Config, register_section
from fedpriv.errors import InputError
from fedpriv.schema import one_of, positive, rule

__all__ = ["ADVERSARY_BEHAVIOURS", "AdversaryConfig"]

#: Adversarial behaviour → its parameters, their defaults and what is allowed.
ADVERSARY_BEHAVIOURS: dict[str, dict[str, tuple[float, str]]] = {
    "under-noise": {"factor": (0.25, "a number in (0, 1): the fraction of the declared noise "
                                     "scale actually added")},
    "no-noise": {},
    "false-sample-rate": {"factor": (0.1, "a number in (0, 1): the declared sampling rate "
                                           "over the true one")},
    "scale-update": {"factor": (1e6, "a finite number > 0, != 1: the factor on the update")},
    "malformed": {},
    "replay": {},
}


@dataclass(frozen=True)
class AdversaryConfig:
    """One ``[[adversary]]`` table: clients that misbehave, and how (``clients/adversaries.py``).

    A test of the auditor and of robust strategies, not a threat model of fedpriv's own
    clients: an adversary trains and replies through fedpriv's ClientApp, wrapped in a Flower
    client mod that changes what it trains with or what it says.
    """

    clients: list[int] = rule("a non-empty list of client ids", bool, default_factory=list)
    behaviour: str = rule(*one_of(*ADVERSARY_BEHAVIOURS), default="no-noise")
    factor: float | None = rule("a number > 0 (see the behaviour)", positive, default=None)

    def value(self) -> float | None:
        """The behaviour's factor (its default when unset; None for a behaviour without one)."""
        spec = ADVERSARY_BEHAVIOURS[self.behaviour].get("factor")
        return None if spec is None else spec[0] if self.factor is None else self.factor


def check_adversaries(cfg: Config) -> None:
    """Each ``[[adversary]]``: client ids in range, each client in one table at most, and the
    behaviour's factor in its range (or unset where the behaviour takes none).

    Raises
    ------
    InputError
        Naming ``adversary[i].clients`` or ``adversary[i].factor``.
    """
    seen: set[int] = set()
    num_clients = cfg.data.num_clients
    for i, adversary in enumerate(cfg.adversary):
        key = f"adversary[{i}]"
        bad = [c for c in adversary.clients
               if not isinstance(c, int) or not 0 <= c < num_clients or c in seen]
        if bad or not adversary.clients:
            raise InputError(f"{key}.clients", adversary.clients,
                             f"distinct client ids in [0, {num_clients - 1}], each "
                             "in one [[adversary]] table")
        seen.update(adversary.clients)
        spec = ADVERSARY_BEHAVIOURS[adversary.behaviour].get("factor")
        if spec is None and adversary.factor is not None:
            raise InputError(f"{key}.factor", adversary.factor,
                             f"unset: {adversary.behaviour} takes no factor")
        factor = adversary.value()
        low_high = {"under-noise": (0, 1), "false-sample-rate": (0, 1)}.get(adversary.behaviour)
        if spec is not None and factor is not None and (
                (low_high and not low_high[0] < factor < low_high[1]) or factor == 1.0):
            raise InputError(f"{key}.factor", factor, spec[1])


register_section("adversary", AdversaryConfig, many=True, check=check_adversaries)
