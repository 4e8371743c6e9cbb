"""The privacy-loss distributions inside a dp-accounting PLD as arrays, and their privacy profile.

A dp-accounting ``PrivacyLossDistribution`` holds, for each neighbouring direction ("remove"
and "add"), the law of the privacy loss ``L = log(dP/dQ)(o)`` with ``o ~ P`` for that
direction's dominating pair ``(P, Q)``: masses on the grid ``kΔ`` plus a mass at ``L = +∞``
([1]_; dp-accounting's ``PLDPmf`` docstring). For a symmetric PLD (one unsubsampled Gaussian,
Laplace or VMF release) both directions are the same pmf. :func:`loss_pmfs` reads those arrays;
dp-accounting exposes no public accessor, so it reads the private fields of ``DensePLDPmf``
(``_lower_loss``, ``_probs``, ``_infinity_mass``, ``_discretization``; dp-accounting 0.4–0.6)
and fails loudly if they move. FFT composition leaves round-off negatives (``|p| ≲ 1e-18``);
they are set to 0.

:func:`pld_privacy_profile` evaluates the hockey-stick divergence
``δ(ε) = P(L = ∞) + Σ_{l > ε} p_l (1 − e^{ε − l})`` of each direction at every grid multiple
``ε = kΔ ≥ 0`` (where the profile's kinks lie) and takes the larger of the two, exactly as
``PrivacyLossDistribution.get_delta_for_epsilon`` does, but vectorised with tail sums: the
library evaluates it in a Python loop, ≈ 10 s for a 100-fold composed PLD at Δ = 1e-4, against
≈ 0.1 s here. Written by hand for that reason; tested against the library.

References
----------
.. [1] S. Meiser, E. Mohammadi, "Tight on budget? Tight bounds for r-fold approximate
   differential privacy", CCS 2018 (privacy-loss distributions, δ(ε) as a tail sum).
.. [2] Google, dp-accounting, ``dp_accounting.pld.pld_pmf`` and
   ``dp_accounting.pld.privacy_loss_distribution``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fedpriv.leakage.profiles import PrivacyProfile

__all__ = ["DELTA_FLOOR", "LossPmf", "is_symmetric", "loss_pmfs", "pld_privacy_profile"]

DELTA_FLOOR = 1e-12
"""The profile's ε grid ends where δ first falls to this value (lines beyond move f by less)."""


@dataclass(frozen=True)
class LossPmf:
    """Law of the privacy loss ``L`` under ``P``: ``P(L = losses[i]) = probs[i]``,
    ``P(L = +∞) = infinity_mass``; ``losses`` are the increasing multiples of ``discretization``.
    """

    losses: np.ndarray
    probs: np.ndarray
    infinity_mass: float
    discretization: float

    def hockey_stick(self, epsilons: npt.ArrayLike) -> np.ndarray:
        """``δ(ε) = P(L = ∞) + Σ_{l > ε} p_l (1 − e^{ε−l})`` at increasing ``ε ≥ 0``.

        Tail sums over the losses above ``ε``: ``A = Σ p_l``, ``log B = log Σ p_l e^{−l}``
        (log space, so ``e^{ε} B`` neither overflows nor underflows at large ``ε``).
        """
        eps = np.asarray(epsilons, dtype=float)
        head = np.concatenate([np.cumsum(self.probs[::-1])[::-1], [0.0]])
        with np.errstate(divide="ignore"):
            log_weights = np.log(self.probs) - self.losses
        log_tail = np.concatenate([np.logaddexp.accumulate(log_weights[::-1])[::-1], [-np.inf]])
        k = np.searchsorted(self.losses, eps, side="right")  # first loss above ε
        return self.infinity_mass + head[k] - np.exp(eps + log_tail[k])


def _dense_arrays(pmf: Any) -> LossPmf:
    dense = pmf.to_dense_pmf()
    try:
        step = float(dense._discretization)
        lower, probs = int(dense._lower_loss), np.maximum(np.asarray(dense._probs, float), 0.0)
        infinity = float(dense._infinity_mass)
    except AttributeError as exc:  # pragma: no cover - only on a dp-accounting layout change
        raise RuntimeError(f"dp-accounting's DensePLDPmf layout changed: {exc}") from exc
    losses = (lower + np.arange(probs.size)) * step
    return LossPmf(losses=losses, probs=probs, infinity_mass=infinity, discretization=step)


def loss_pmfs(pld: Any) -> tuple[LossPmf, LossPmf]:
    """``(remove, add)`` privacy-loss pmfs of a dp-accounting ``PrivacyLossDistribution``.

    For a symmetric PLD the same object is returned twice.
    """
    remove = _dense_arrays(pld._pmf_remove)
    return remove, (remove if is_symmetric(pld) else _dense_arrays(pld._pmf_add))


def is_symmetric(pld: Any) -> bool:
    """Whether the PLD's add direction is its remove direction (dp-accounting's flag)."""
    return bool(pld._symmetric)


def pld_privacy_profile(pld: Any, delta_floor: float = DELTA_FLOOR) -> PrivacyProfile:
    """``δ(ε) = max(δ_remove(ε), δ_add(ε))`` at every multiple of the discretisation in
    ``[0, ε(delta_floor)]`` (the kinks, so converting to a trade-off function is exact for the
    discretised PLD), clipped to [0, 1] against the pessimistic construction's rounding.
    """
    remove, add = loss_pmfs(pld)
    step = remove.discretization
    top = max(remove.losses[-1], add.losses[-1], 0.0)
    epsilons = np.arange(int(np.ceil(top / step)) + 2) * step
    deltas = remove.hockey_stick(epsilons)
    if add is not remove:
        deltas = np.maximum(deltas, add.hockey_stick(epsilons))
    deltas = np.clip(deltas, 0.0, 1.0)
    below = np.flatnonzero(deltas <= delta_floor)
    stop = int(below[0]) + 1 if below.size else deltas.size
    return PrivacyProfile(epsilons=epsilons[: max(stop, 2)], deltas=deltas[: max(stop, 2)])
