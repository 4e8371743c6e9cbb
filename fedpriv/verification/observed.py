"""ε from what the server saw: lower confidence bounds on a client's noise scale, measured from
its own releases (issue #25 item 7; privacy-math.md §9; docs/trust.md).

The declared ε takes the client's word for its noise; the canary bound is a lower bound. This
module gives the third number, an *upper* confidence bound: the noise scale the updates show
at least, with confidence ``1 − β``, to be accounted at the server's own ``q`` and steps. It
rests on one assumption no server can observe — **each example's gradient is clipped to the
declared ``C``** — which bounds the signal, ``‖Σ_t S_t‖ ≤ C·B`` (§9). The noise law (Gaussian,
Laplace) and its freshness across rounds are what the other checks test (§9.2–9.4).

For one client-round write ``u = L·Σ_t r_t = Σ_t S_t + N`` (:class:`ClientUpdate`, ``k`` steps,
``p`` coordinates, ``B`` records used) and ``x = ‖u‖`` in the mechanism's norm.

* **Gaussian, k > 1** (the signal of step ``t`` may depend on the noise of earlier steps, so it
  can point along it): ``x ≤ ‖N‖₂ + C·B`` (triangle) and ``‖N‖₂ = σC√k·χ_p``, so
  ``σ_LCB = (x − C·b)₊ / (C√k · χ_p⁻¹(1 − β_N))``.
* **Gaussian, k = 1** (the clipped sum is fixed before its noise is drawn): given ``S``,
  ``x²/(σC)² ~ χ'²_p(‖S‖²/(σC)²)``, non-central and stochastically increasing in its
  non-centrality, so at ``‖S‖ ≤ C·b`` the bound is the least ``σ`` with
  ``P(χ'²_p(b²/σ²) ≥ x²/(σC)²) > β_N`` (the signal enters in quadrature; the root found by
  Brent's method and stepped down by its tolerance, so it never exceeds the exact one).
* **Laplace** (ℓ1 clipping, ``N = λC·V``): ``x ≤ ‖N‖₁ + C·B`` and ``‖V‖₁ ~ Gamma(p, 1)`` at
  ``k = 1`` (a Chernoff bound on ``Σ_i |Σ_k Laplace(1)|`` otherwise,
  :func:`~fedpriv.verification.laws.laplace_l1_law`), so
  ``λ_LCB = (x − C·b)₊ / (C · Q(1 − β_N))``, ``Q`` an upper quantile of ``‖V‖₁``.
* **VMF**: every step releases a direction of fixed norm; κ shapes only where it points, which
  one release cannot show against an unknown signal: not observable (ε_observed = ∞).

``b`` bounds ``B``: known for declared or fixed-size batches, else its ``1 − β_B`` quantile
under ``Binomial(k·n, q)`` at the declared (server-instructed) ``n`` and ``q``.

**Rounds.** A client's ``j``-th observed round is bounded at level
``β_j = β · 6/(π² j²)`` (``Σ_j β_j = β``, fixed in advance, so the statement holds at every
round at once and needs no memory of earlier updates), split into ``β_N = β_B = β_j/2`` when
``B`` is random. The client's bound is the least of its rounds' bounds; accounting every
release at it bounds the ε of noise that may differ round to round (a client noising honestly
in nine rounds and little in the tenth gets the tenth round's bound). The state per client is
O(1): the count of rounds and the running minimum (:class:`ObservedNoise`).

References
----------
.. [1] N. L. Johnson, S. Kotz, N. Balakrishnan, "Continuous Univariate Distributions", vol. 2,
   Wiley 1995, ch. 29 (the non-central χ²; monotone likelihood ratio in its non-centrality).
.. [2] C. E. Bonferroni, "Teoria statistica delle classi e calcolo delle probabilità", 1936
   (the union bound over rounds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from fedpriv.validate import check_dim, check_positive, check_probability
from fedpriv.verification.laws import laplace_l1_law, ncx2_sf_minus
from fedpriv.verification.records import RecordCount
from fedpriv.verification.roundoff import (
    ROUNDOFF_RISK,
    chi_roundoff_quantile,
    gamma_roundoff_quantile,
    norm_tolerance,
)
from fedpriv.verification.update import ClientUpdate

__all__ = [
    "ASSUMPTION",
    "LAWS",
    "MAX_LAPLACE_STEPS",
    "OBSERVED_CONFIDENCE",
    "NoiseObservation",
    "ObservedNoise",
    "Observer",
    "gaussian_noise_lcb",
    "laplace_noise_lcb",
    "observe_gaussian",
    "observe_laplace",
    "round_level",
    "round_observation",
]

OBSERVED_CONFIDENCE = 0.95
"""Confidence ``1 − β`` of ``epsilon_observed``, over all of a client's rounds together."""
ASSUMPTION = "per-example clipping at the declared C (not observable by the server)"
"""The one assumption behind ``epsilon_observed``; the report states it beside the number."""
LAWS = ("gaussian", "laplace")
_RTOL = 1e-9
"""Relative tolerance of the Gaussian one-step bound's root (far below the ledger's 1 % grid)."""
MAX_LAPLACE_STEPS = 10_000
"""Most local steps the Laplace bound takes: the law of ``|Σ_k Laplace(1)|`` costs O(k)
(:func:`~fedpriv.verification.laws.log_mgf_abs_laplace_sum`); beyond it: not observed."""


@dataclass(frozen=True)
class NoiseObservation:
    """What one client-round shows of its noise: everything :meth:`lower_bound` needs.

    Attributes
    ----------
    law
        ``"gaussian"`` (ℓ2) or ``"laplace"`` (ℓ1).
    norm
        ``x/C``: the release's norm in clip bounds, less the rounding slack.
    dim, steps
        ``p`` and ``k``.
    trials, rate
        The law of ``B``: ``Binomial(trials, rate)`` (``rate = 1``: ``B = trials``).
    clip_slack
        Relative float32 tolerance on the clip bound (``C·(1 + clip_slack)`` per record).
    """

    law: str
    norm: float
    dim: int
    steps: int
    trials: int
    rate: float
    clip_slack: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able mapping (the tally keeps it: ``--resume`` folds it again): what
        ``dataclasses.asdict`` gives (every field a number or a string), without its deep
        copy (~80 µs per reply)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> NoiseObservation:
        """The observation :meth:`as_dict` wrote."""
        return cls(**{k: values[k] for k in cls.__dataclass_fields__})

    def records_bound(self, beta: float) -> float:
        """``b·(1 + clip_slack)``: ``B ≤ b`` except with probability ``beta`` (``B`` itself
        when known)."""
        count = RecordCount(self.trials, self.rate, "")
        b = count.trials if count.known else count.upper_quantile(beta)
        return b * (1.0 + self.clip_slack)

    def lower_bound(self, beta: float) -> float:
        """The noise parameter (σ for Gaussian, λ for Laplace) this round shows at least,
        except with probability ``beta`` (split between ``B`` and the noise when ``B`` is
        random)."""
        b_beta = 0.0 if self.rate == 1.0 else beta / 2.0
        b = self.records_bound(b_beta)
        noise_beta = beta - b_beta
        if self.law == "gaussian":
            return gaussian_noise_lcb(self.norm, dim=self.dim, steps=self.steps, signal=b,
                                      beta=noise_beta)
        return laplace_noise_lcb(self.norm, dim=self.dim, steps=self.steps, signal=b,
                                 beta=noise_beta)


def round_observation(doc: Mapping[str, Any] | None) -> NoiseObservation | str | None:
    """The round's observation a stored ``epsilon_observed`` document carries (the tally's
    ``round_observation``: what ``--resume`` folds again); None where it carries none."""
    this = None if doc is None else doc.get("round_observation")
    return NoiseObservation.from_dict(this) if isinstance(this, Mapping) else this


def round_level(beta: float, index: int) -> float:
    """``β_j = β · 6/(π² j²)`` for a client's ``j``-th observed round (``j ≥ 1``): levels
    fixed in advance whose sum over all rounds is ``β``."""
    return beta * 6.0 / (math.pi**2 * check_dim("index", index) ** 2)


def gaussian_noise_lcb(norm: float, *, dim: int, steps: int, signal: float,
                       beta: float) -> float:
    """Lower ``1 − β`` confidence bound on σ from ``x/C = norm`` with ``‖Σ S_t‖ ≤ C·signal``
    (module docstring: triangle for ``k > 1``, non-central χ² for ``k = 1``); 0 when the norm
    is within what the signal alone can make."""
    p, k = check_dim("dim", dim), check_dim("steps", steps)
    a = check_probability("beta", beta)
    x, s = max(0.0, float(norm)), max(0.0, float(signal))
    if k > 1 or s == 0.0:
        top = math.sqrt(float(special.chdtri(p, a)))  # χ_p⁻¹(1 − β)
        return max(0.0, x - s) / (math.sqrt(k) * top)
    if x <= s:
        return 0.0

    def excess(sigma: float) -> float:  # > 0: σ is in the confidence set (increasing in σ)
        return ncx2_sf_minus((x / sigma) ** 2, p, (s / sigma) ** 2, a)

    high = x / math.sqrt(float(special.chdtri(p, 1.0 - a)))  # above any σ in the set
    low = max(0.0, x - s) / math.sqrt(float(special.chdtri(p, a)))  # the triangle bound
    while excess(high) <= 0.0:  # sf → 1 as σ grows: a few doublings at most
        high *= 2.0
    if low <= 0.0 or excess(low) > 0.0:  # the set reaches below the triangle bound: keep it
        return low
    root = optimize.brentq(excess, low, high, xtol=1e-12, rtol=_RTOL)
    return max(low, root * (1.0 - 4.0 * _RTOL) - 1e-12)  # at or below the exact root


def laplace_noise_lcb(norm: float, *, dim: int, steps: int, signal: float,
                      beta: float) -> float:
    """Lower ``1 − β`` confidence bound on λ from ``‖u‖₁/C = norm`` with ``‖Σ S_t‖₁ ≤
    C·signal``: ``(x − b)₊ / Q(1 − β)`` (module docstring)."""
    p, k = check_dim("dim", dim), check_dim("steps", steps)
    a = check_probability("beta", beta)
    if k > MAX_LAPLACE_STEPS:
        raise ValueError(f"more than {MAX_LAPLACE_STEPS} local steps for the Laplace bound")
    gap = max(0.0, float(norm) - max(0.0, float(signal)))
    if gap == 0.0:
        return 0.0
    return gap / _laplace_quantile(p, k, a)


@lru_cache(maxsize=1024)
def _laplace_quantile(dim: int, steps: int, level: float) -> float:
    """A ``t`` with ``P(‖V‖₁ ≥ t) ≤ level``: exact (Gamma) at ``k = 1``, else the least ``t``
    where the Chernoff bound reaches ``level``; kept, since a round's clients share
    ``(p, k, β_j)``."""
    if steps == 1:
        return float(stats.gamma.isf(level, dim))
    return _upper_quantile(laplace_l1_law(dim, steps).sf, level, dim * (steps + 1.0))


def _upper_quantile(sf: Callable[[float], float], level: float, start: float) -> float:
    """A ``t`` with ``sf(t) ≤ level`` (``sf`` an upper bound on the tail): the least such,
    by bisection, so ``P(X ≥ t) ≤ level``."""
    high = start
    while sf(high) > level:
        high *= 2.0
    low = 0.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        if sf(mid) > level:
            low = mid
        else:
            high = mid
        if high - low <= 1e-10 * high:
            break
    return high


@dataclass
class ObservedNoise:
    """One client's running bound: rounds observed, the least per-round bound, and why the
    noise could not be observed if some round could not show it (then the bound is 0)."""

    confidence: float = OBSERVED_CONFIDENCE
    rounds: int = 0
    bound: float = math.inf
    reason: str | None = None
    law: str | None = None

    def add(self, observation: NoiseObservation | str) -> float | None:
        """Fold one round (an observation, or the reason it shows nothing); return its
        bound (None for a reason). Bounds of different noise laws (σ, λ) do not pool."""
        if not isinstance(observation, str) and self.law not in (None, observation.law):
            observation = f"not observable: the noise law changed ({self.law}, {observation.law})"
        if isinstance(observation, str):
            self.reason = self.reason or observation
            self.bound = 0.0
            return None
        beta = round_level(1.0 - self.confidence, self.rounds + 1)
        try:  # a reply's numbers: whatever they are, one client's ∞, never the server's error
            value = observation.lower_bound(beta)
        except (ValueError, ArithmeticError) as err:
            return self.add(f"not observable: {err}")
        self.law = observation.law
        self.rounds += 1
        self.bound = min(self.bound, value)
        return value


Observer = Callable[[ClientUpdate], "NoiseObservation | str"]
"""A declared mechanism's observation of a recovered update (``Mechanism.observe``)."""


def _observation(update: ClientUpdate, law: str, norm_ord: int, clip: float,
                 step_noise: float) -> NoiseObservation:
    """``‖u‖/C`` less the rounding slack, which is bounded as the reply check bounds it
    (:mod:`~fedpriv.verification.roundoff`; ``step_noise`` a bound on one step's noise norm
    in that norm)."""
    p, records = update.dim, update.records
    most = records.upper_quantile(ROUNDOFF_RISK)
    tolerance = norm_tolerance(p, most, update.unit_roundoff)
    step = (step_noise + clip * (1.0 + tolerance) * most) / update.batch_size
    slack = update.batch_size * update.summed_error(norm_ord, step)
    u = update.noisy_sum
    # summed in numpy, not by BLAS: a multithreaded dot costs more than the pass on busy cores
    norm = float(np.abs(u).sum()) if norm_ord == 1 else math.sqrt(float(np.square(u).sum()))
    return NoiseObservation(law, max(0.0, norm - slack) / clip, p, update.steps,
                            records.trials, records.rate, tolerance)


def observe_gaussian(update: ClientUpdate, *, clip_bound: float,
                     noise_multiplier: float) -> NoiseObservation:
    """The Gaussian mechanism's observation (ℓ2; the declared σ only sizes the rounding
    slack, as in :func:`~fedpriv.verification.verify_gaussian`)."""
    c = check_positive("clip_bound", clip_bound)
    step = noise_multiplier * c * chi_roundoff_quantile(update.dim)
    return _observation(update, "gaussian", 2, c, step)


def observe_laplace(update: ClientUpdate, *, clip_bound: float,
                    laplace_scale: float) -> NoiseObservation | str:
    """The Laplace mechanism's observation (ℓ1; the declared λ only sizes the rounding
    slack, as in :func:`~fedpriv.verification.verify_laplace`)."""
    c = check_positive("clip_bound", clip_bound)
    if update.steps > MAX_LAPLACE_STEPS:
        return f"not observable: more than {MAX_LAPLACE_STEPS} local steps for the Laplace bound"
    step = laplace_scale * c * gamma_roundoff_quantile(update.dim)
    return _observation(update, "laplace", 1, c, step)
