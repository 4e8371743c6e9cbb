"""Canaries in a federated run: what the client and the auditing server derive per client-round.

Both sides build the same :class:`~fedpriv.canaries.CanaryDesign` from the run's seed, the
client (partition) id and the round (:func:`round_design`) — no data and no design travel. The
client adds the in-canaries' sum to its clipped sum in every local step; the server removes
their share from the update, scores the canaries, and sets the lower bound
(:func:`estimate`) against the canary's own formal ε (:func:`canary_epsilon`). Callers pass
the ``[audit.canaries]`` settings and what the canaries need of the mechanism (sensitivity,
clipping norm, additivity) as plain values: this module reads neither the config nor the
mechanisms.

Which clients: those whose mechanism clips (finite sensitivity) and releases additively
(``Mechanism.additive``: ``(S + N)/L``) — ``gaussian``, ``laplace``, ``clip``. A VMF release
is a direction: the canaries' share of its update cannot be removed, so they would change what
is trained, attacked and aggregated, and fedpriv inserts none there (the library can still
score VMF releases: docs/canaries.md). ``none`` clips nothing, so no canary is a record of
bounded sensitivity.

Fresh canaries every round (the design's seed includes the round) bound the *per-round* ε of
a canary; a canary is in every local step of its round, so its formal ε is the round's
releases without subsampling (:func:`fedpriv.canaries.canary_events`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fedpriv.canaries.bound import EpsilonLowerBound
from fedpriv.canaries.clopper_pearson import epsilon_clopper_pearson
from fedpriv.canaries.design import CanaryDesign
from fedpriv.canaries.gdp import epsilon_gdp_fit, epsilon_gdp_thresholds
from fedpriv.canaries.one_run import epsilon_one_run
from fedpriv.canaries.releases import canary_events
from fedpriv.errors import InputError
from fedpriv.seeding import derive_seed

if TYPE_CHECKING:
    from fedpriv.accounting.events import Release

__all__ = ["ESTIMATORS", "SEED_STREAM", "canary_epsilon", "estimate", "round_design"]

#: The ``audit.canaries.method`` names and their estimators.
ESTIMATORS: dict[str, Callable[..., EpsilonLowerBound]] = {
    "one-run": epsilon_one_run,
    "clopper-pearson": epsilon_clopper_pearson,
    "gdp-thresholds": epsilon_gdp_thresholds,
    "gdp-fit": epsilon_gdp_fit,
}
#: The stream of :func:`fedpriv.seeding.derive_seed` the designs come from.
SEED_STREAM = "canaries"


def round_design(
    run_seed: int, client: int, rnd: int, dim: int, *, enabled: bool, count: int, kind: str,
    sensitivity: float, norm_ord: int, additive: bool,
) -> CanaryDesign | None:
    """The canaries of ``client`` in round ``rnd`` (module docstring), or None where none are
    inserted: canaries off, or a mechanism that is not additive or clips nothing.

    Parameters
    ----------
    run_seed, client, rnd, dim
        The run's seed, the client (partition) id, the round and the model dimension ``p``.
    enabled, count, kind
        The ``[audit.canaries]`` settings: canaries on, how many per client-round (at most
        ``dim`` for ``coordinate`` canaries), and their kind (``coordinate``, ``random``).
    sensitivity, norm_ord, additive
        Of the mechanism the client trains with (client side) or declares (server side): the
        canaries' norm, the norm it is measured in, and whether its release is ``(S + N)/L``
        (``Mechanism.additive``).
    """
    if not (enabled and additive and math.isfinite(sensitivity)):
        return None
    if kind == "coordinate" and count > dim:
        raise InputError("audit.canaries.count", count,
                         f"at most the model's {dim} parameters for coordinate canaries")
    return CanaryDesign(derive_seed(run_seed, client, rnd, SEED_STREAM), count, dim,
                        sensitivity, kind, norm_ord)


@functools.lru_cache(maxsize=64)
def canary_epsilon(release: Release, steps: int, delta: float, accountant: str) -> float:
    """Formal ε at ``delta`` of a canary in every one of a round's ``steps`` releases (no
    subsampling), by the run's accountant; ``inf`` for a release without a guarantee.
    Cached: every client with the same mechanism shares it."""
    from fedpriv.accounting import ReleaseEvent, epsilon

    events = canary_events([ReleaseEvent(release, 1.0, steps)])
    return epsilon(events, delta, accountant=accountant).epsilon


def estimate(
    method: str, in_scores: Any, out_scores: Any, *, delta: float, confidence: float
) -> EpsilonLowerBound:
    """The lower bound of ``method`` (a key of :data:`ESTIMATORS`) from in/out scores."""
    if method not in ESTIMATORS:
        raise InputError("audit.canaries.method", method, f"one of {list(ESTIMATORS)}")
    return ESTIMATORS[method](in_scores, out_scores, delta=delta, confidence=confidence)
