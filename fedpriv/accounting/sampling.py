"""Sampling as it happens and the neighbouring relation: what each event is accounted as.

privacy-math.md §14. An accountant must model the sampling the code performs: a Poisson model of
a fixed-size sample is not an upper bound (Chua et al., "How private are DP-SGD
implementations?", ICML 2024). :func:`accounted_events` turns a ledger of
:class:`~fedpriv.accounting.events.ReleaseEvent` into the Poisson-sampled add/remove events the
routes (:mod:`.routes`) compose, by the pair that dominates each one:

* **Poisson, add/remove**: the event itself (the subsampled pair of each release class).
* **Fixed size m of N, add/remove**: an added example displaces one sampled example, so the
  released sum moves by up to ``2Δ`` with probability ``m/(N+1)``: the release at twice its
  sensitivity (:meth:`Release.doubled`), Poisson-sampled at ``q = m/(N+1)``.
* **Replace-one** (either sampling): the replaced position takes part with probability ``q``
  (``m/N`` for a fixed-size sample) and the two signals are the ends of a ball of diameter
  ``2Δ``: :class:`ReplaceOneRelease`, whose PLD is the mixture pair of
  :mod:`.mixture_pld` and whose RDP is dp-accounting's sampled-without-replacement Gaussian
  (Wang, Balle, Kasiviswanathan 2019, Thm. 27) where that applies, else the unsampled pair.

A Poisson release with its sampling rate 1 is not sampled: every relation gives the release
itself (add/remove) or its doubled sensitivity (replace-one). A fixed-size sample of all ``N``
records (``m = N``) is a fixed-size sample all the same: under add/remove the added record
displaces one of them, the doubled release at ``N/(N+1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpriv.accounting.events import NEIGHBOURING_RELATIONS, Release, ReleaseEvent
from fedpriv.errors import InputError

__all__ = ["ReplaceOneRelease", "accounted_events", "check_neighbouring", "level_relation",
           "sampled_population"]


def check_neighbouring(value: Any) -> str:
    """``value`` if it names a relation of :data:`NEIGHBOURING_RELATIONS`, else InputError."""
    if value not in NEIGHBOURING_RELATIONS:
        raise InputError("neighbouring", value, f"one of {', '.join(NEIGHBOURING_RELATIONS)}")
    return value


def level_relation(level: str, neighbouring: str) -> str:
    """The relation a release of ``level`` is accounted under: the run's ``neighbouring`` for a
    record-level release; ``"add-remove"`` — its events taken as they are — at the client
    level, whose release class already is its pair against the server (replace-one,
    privacy-math.md §11). The one rule the ledger, the budget check, the calibration and the
    pre-run check share."""
    return check_neighbouring(neighbouring) if level == "record" else "add-remove"


def sampled_population(sampling: str, level: str, sample_rate: float, n: int) -> int | None:
    """The population of a fixed-size sample — ``n`` for a record-level release on fixed-size
    batches (``train.sampling = "fixed"``) below rate 1 — else None (Poisson batches, every
    record in every release, or a client-level release, which samples no records)."""
    return n if sampling == "fixed" and level == "record" and sample_rate < 1.0 else None


@dataclass(frozen=True)
class ReplaceOneRelease(Release):
    """One release of ``inner`` under replace-one neighbours (module docstring).

    ``population`` is ``N`` of a fixed-size sample (the RDP route's sampling without
    replacement), None under Poisson sampling. The pair, per sampling rate ``q``: PLD
    :func:`~fedpriv.accounting.mixture_pld.mixture_pld` for a release with a 1-D noise law
    (:attr:`Release.noise_law`), else the unsampled release at twice its sensitivity (which
    dominates the mixture pair: hockey-stick and Rényi divergences are jointly convex);
    RDP the sampled-without-replacement Gaussian for a Gaussian on a fixed-size sample, else
    the unsampled pair.
    """

    inner: Release
    population: int | None = None

    @property
    def mechanism(self) -> str:  # type: ignore[override]
        return self.inner.mechanism

    @property
    def pld_discretization(self) -> float:  # type: ignore[override]
        return self.inner.pld_discretization

    @property
    def formal_guarantee(self) -> bool:
        return self.inner.formal_guarantee

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        return self.inner.doubled().rdp(orders)

    def subsampled_rdp(self, orders: tuple[float, ...], sample_rate: float) -> np.ndarray:
        law = self.inner.noise_law
        if sample_rate < 1.0 and self.population is not None and law is not None \
                and law[0] == "gaussian":
            from fedpriv.accounting.dp_library import gaussian_without_replacement_rdp

            size = round(sample_rate * self.population)
            # dp-accounting's σ is over the distance of the two signals: 2Δ
            return gaussian_without_replacement_rdp(orders, law[1] / 2.0, self.population, size)
        return self.rdp(np.array(orders))

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        law = self.inner.noise_law
        if law is None:
            return self.inner.doubled().pld(1.0, discretization, steps=steps)
        from fedpriv.accounting.mixture_pld import mixture_pld

        return mixture_pld(*law, sample_rate, discretization, steps=steps,
                           default=self.inner.pld_discretization)

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        law = self.inner.noise_law
        if law is None:
            return self.inner.doubled().grid_need(1.0, steps)
        from fedpriv.accounting.mixture_pld import mixture_grid_need

        return mixture_grid_need(*law, sample_rate, steps)

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        """The unsampled pair's: the release at twice its sensitivity."""
        return self.inner.doubled().tradeoff(alpha)

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        return self.inner.log_bayes_capacity(dim, radius)

    def as_dict(self) -> dict[str, Any]:
        return {**self.inner.as_dict(), "neighbouring": "replace-one"}


def accounted_events(
    events: Sequence[ReleaseEvent], neighbouring: str = "add-remove"
) -> tuple[ReleaseEvent, ...]:
    """The Poisson-sampled add/remove events that dominate ``events`` under ``neighbouring``
    (module docstring); raises InputError for an unknown relation, or a release without a
    doubled sensitivity on a fixed-size sample under add/remove."""
    check_neighbouring(neighbouring)
    return tuple(_accounted(event, neighbouring) for event in events)


def _accounted(event: ReleaseEvent, neighbouring: str) -> ReleaseEvent:
    if neighbouring == "replace-one":
        return ReleaseEvent(ReplaceOneRelease(event.release, event.population),
                            event.sample_rate, event.count)
    if event.sampling != "fixed-size":
        return ReleaseEvent(event.release, event.sample_rate, event.count)
    rate = event.sample_size / (event.population + 1)  # type: ignore[operator]
    return ReleaseEvent(event.release.doubled(), rate, event.count)
