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
  a bracketing search from below, so it never exceeds the exact one: :func:`gaussian_noise_lcbs`).
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import special, stats

from fedpriv.validate import check_dim, check_positive, check_probability
from fedpriv.verification.laws import laplace_l1_law, ncx2_sf_minus
from fedpriv.verification.records import RecordCount
from fedpriv.verification.roundoff import (
    ROUNDOFF_RISK,
    chi_roundoff_quantile,
    gamma_roundoff_quantile,
    norm_tolerance,
)
from fedpriv.verification.update import BLOCK, ClientUpdate

__all__ = [
    "ASSUMPTION",
    "LAWS",
    "MAX_LAPLACE_STEPS",
    "OBSERVED_CONFIDENCE",
    "NoiseObservation",
    "ObservedNoise",
    "Observer",
    "gaussian_noise_lcb",
    "gaussian_noise_lcbs",
    "gaussian_norms",
    "laplace_noise_lcb",
    "lower_bounds",
    "observe_gaussian",
    "observe_gaussian_many",
    "observe_laplace",
    "round_bounds",
    "round_level",
    "round_observation",
]

OBSERVED_CONFIDENCE = 0.95
"""Confidence ``1 − β`` of ``epsilon_observed``, over all of a client's rounds together."""
ASSUMPTION = "per-example clipping at the declared C (not observable by the server)"
"""The one assumption behind ``epsilon_observed``; the report states it beside the number."""
LAWS = ("gaussian", "laplace")
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
    is within what the signal alone can make. One reply's :func:`gaussian_noise_lcbs`: the
    same number, bit for bit, as that of a batch it is part of."""
    return float(gaussian_noise_lcbs([norm], dim=dim, steps=steps, signal=signal,
                                     beta=beta)[0])


def gaussian_noise_lcbs(norms: Sequence[float] | np.ndarray, *, dim: int, steps: int,
                        signal: float | Sequence[float] | np.ndarray,
                        beta: float) -> np.ndarray:
    """:func:`gaussian_noise_lcb` of every norm of replies sharing ``(p, k, β)`` at once (each
    with its own ``signal`` bound, or one for all)
    (issue 37 item 2): the ``k = 1`` root of each found together, by a bracketing
    regula falsi (Illinois) over the array — one vectorised non-central χ² tail per step
    for the whole batch, ≈ 8 steps instead of brentq's ≈ 16 scalar calls per reply. Each
    element's result is the bracket's lower end, where the tail is at most ``β``, stepped
    down by ``4·10⁻⁹·σ + 10⁻¹²`` past the tail's round-off, as brentq's root was: never above
    the exact root, within ``≈ 4·10⁻⁹`` relative of the per-reply brentq bound it replaces.
    Element by element arithmetic: one norm's result does not depend on the others'."""
    p, k = check_dim("dim", dim), check_dim("steps", steps)
    a = check_probability("beta", beta)
    x = np.fmax(0.0, np.asarray(norms, dtype=float).reshape(-1))  # NaN: 0, as max(0, NaN)
    s = np.broadcast_to(np.fmax(0.0, np.asarray(signal, dtype=float)), x.shape)
    top = math.sqrt(float(special.chdtri(p, a)))  # χ_p⁻¹(1 − β)
    if k > 1:
        return np.maximum(0.0, x - s) / (math.sqrt(k) * top)
    triangle = np.maximum(0.0, x - s) / top
    out = np.where((x <= s) & (s > 0.0), 0.0, triangle)
    todo = np.flatnonzero((x > s) & (s > 0.0))
    if todo.size:
        f_low = _excess(triangle[todo], x[todo], p, s[todo], a)[1]
        todo = todo[f_low <= 0.0]  # else the set reaches below the triangle bound: keep it
        if todo.size:
            found = _lowest_in_set(x[todo], triangle[todo].copy(), f_low[f_low <= 0.0], p,
                                   s[todo], a)
            # stepped down past the tail's own round-off (scipy.stats.ncx2 agrees it is out)
            out[todo] = np.maximum(triangle[todo], found * (1.0 - 4e-9) - 1e-12)
    return out


def _excess(sigma: np.ndarray, x: np.ndarray, p: int, s: np.ndarray,
            a: float) -> tuple[np.ndarray, np.ndarray]:
    """``P(χ'²_p((s/σ)²) ≥ (x/σ)²) − a`` element by element (> 0: σ is in the confidence set;
    increasing in σ), its sign as sure as :func:`~fedpriv.verification.laws.ncx2_sf_minus`'s
    (the elements within ``10⁻¹³`` of ``a`` go through it); and the same on the normal scale,
    ``Φ⁻¹(tail) − Φ⁻¹(a)`` with that sign, nearly linear in σ: what the steps interpolate."""
    upper = 1.0 - special.chndtr((x / sigma) ** 2, p, (s / sigma) ** 2)
    out = upper - a
    for i in np.flatnonzero(np.abs(out) <= 1e-13):
        out[i] = ncx2_sf_minus(float((x[i] / sigma[i]) ** 2), p, float((s[i] / sigma[i]) ** 2),
                               a)
    scale = special.ndtri(np.clip(upper, 1e-300, 1.0 - 1e-16)) - special.ndtri(a)
    return out, np.where(out > 0.0, np.maximum(scale, 1e-300), np.minimum(scale, 0.0))


def _lowest_in_set(x: np.ndarray, low: np.ndarray, f_low: np.ndarray, p: int, s: np.ndarray,
                   a: float) -> np.ndarray:
    """The least σ with ``_excess > 0``, from below, for each norm: bracket ``[low, high]``
    (``_excess(low) ≤ 0 < _excess(high)``, ``f_low`` on the normal scale) narrowed by
    Illinois steps (bisection where a step falls outside or after 40 steps) until
    ``high − low ≤ 10⁻¹² + 10⁻⁹·high`` (brentq's tolerance before)."""
    high = x / math.sqrt(float(special.chdtri(p, 1.0 - a)))  # above any σ in the set
    f_high = _excess(high, x, p, s, a)[1]
    while np.any(f_high <= 0.0):  # the tail → 1 as σ grows: a few doublings at most
        grow = f_high <= 0.0
        low[grow], f_low[grow] = high[grow], f_high[grow]
        high[grow] *= 2.0
        f_high[grow] = _excess(high[grow], x[grow], p, s[grow], a)[1]
    # two probes 10⁻³ either side of the normal approximation's root (X ≈ N(p + λ, 2p + 4λ)):
    # mostly a bracket of accurate tails on both ends, where the steps converge fast
    z2, a2 = float(special.ndtri(a)) ** 2, np.maximum(x * x - s * s, 1e-300)
    c = 4.0 * z2 * s * s / a2
    t = (p + 0.5 * (c + np.sqrt(c * c + 4.0 * z2 * (2.0 * p + 4.0 * s * s * p / a2)))) / a2
    for factor in (1.0 - 1e-3, 1.0 + 1e-3):
        probe = factor / np.sqrt(t)
        inside = np.flatnonzero((probe > low) & (probe < high))
        fc = _excess(probe[inside], x[inside], p, s[inside], a)[1]
        up = fc > 0.0
        high[inside[up]], f_high[inside[up]] = probe[inside[up]], fc[up]
        low[inside[~up]], f_low[inside[~up]] = probe[inside[~up]], fc[~up]
    side = np.zeros(x.size)
    live = np.arange(x.size)
    for step in range(200):
        tol = 1e-12 + 1e-9 * high[live]
        keep = high[live] - low[live] > tol
        live, tol = live[keep], tol[keep]
        if not live.size:
            break
        lo, hi, flo, fhi = low[live], high[live], f_low[live], f_high[live]
        # the step, moved by half the tolerance away from the end that moved last: the root
        # is then mostly passed, and the bracket closes on it from both sides
        c = hi - fhi * (hi - lo) / (fhi - flo) - 0.5 * tol * side[live]
        bisect = ~((c > lo) & (c < hi)) | (step >= 40)
        c[bisect] = 0.5 * (lo[bisect] + hi[bisect])
        fc = _excess(c, x[live], p, s[live], a)[1]
        up = fc > 0.0
        up_i, down_i = live[up], live[~up]
        high[up_i], f_high[up_i] = c[up], fc[up]
        low[down_i], f_low[down_i] = c[~up], fc[~up]
        f_low[up_i[side[up_i] > 0]] *= 0.5  # the same end moved twice: Illinois
        f_high[down_i[side[down_i] < 0]] *= 0.5
        side[up_i], side[down_i] = 1.0, -1.0
    return low


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

    def level(self) -> float:
        """``β_j`` of the next round this client folds (:func:`round_level`)."""
        return round_level(1.0 - self.confidence, self.rounds + 1)

    def add(self, observation: NoiseObservation | str,
            bound: float | None = None) -> float | None:
        """Fold one round (an observation, or the reason it shows nothing); return its
        bound (None for a reason). Bounds of different noise laws (σ, λ) do not pool.
        ``bound``: the observation's :meth:`~NoiseObservation.lower_bound` at :meth:`level`,
        computed beforehand (:func:`lower_bounds`; None: computed here)."""
        if not isinstance(observation, str) and self.law not in (None, observation.law):
            observation = f"not observable: the noise law changed ({self.law}, {observation.law})"
        if isinstance(observation, str):
            self.reason = self.reason or observation
            self.bound = 0.0
            return None
        try:  # a reply's numbers: whatever they are, one client's ∞, never the server's error
            value = observation.lower_bound(self.level()) if bound is None else bound
        except (ValueError, ArithmeticError) as err:
            return self.add(f"not observable: {err}")
        self.law = observation.law
        self.rounds += 1
        self.bound = min(self.bound, value)
        return value


def lower_bounds(items: Sequence[tuple[NoiseObservation, float]]) -> list[float | None]:
    """:meth:`NoiseObservation.lower_bound` of each ``(observation, β)``, the Gaussian one-step
    bounds of observations sharing ``(p, k, β)`` — a declaration's replies in one round, each
    with its own bound on ``B`` — found together (:func:`gaussian_noise_lcbs`: the same numbers
    as one at a time); None where the bound fails (:meth:`ObservedNoise.add` then says why)."""
    out: list[float | None] = [None] * len(items)
    groups: dict[tuple, list[int]] = {}
    for i, (obs, beta) in enumerate(items):
        groups.setdefault((obs.law, obs.dim, obs.steps, beta), []).append(i)
    for (law, dim, steps, beta), where in groups.items():
        try:
            if law != "gaussian" or len(where) == 1:
                for i in where:
                    out[i] = items[i][0].lower_bound(beta)
                continue
            noise_beta, signals = [], []
            for i in where:  # as lower_bound splits β and bounds B
                obs = items[i][0]
                b_beta = 0.0 if obs.rate == 1.0 else beta / 2.0
                noise_beta.append(beta - b_beta)
                signals.append(obs.records_bound(b_beta))
            for level in set(noise_beta):
                part = [j for j, nb in enumerate(noise_beta) if nb == level]
                values = gaussian_noise_lcbs(
                    [items[where[j]][0].norm for j in part], dim=dim, steps=steps,
                    signal=[signals[j] for j in part], beta=level)
                for j, value in zip(part, values.tolist(), strict=True):
                    out[where[j]] = value
        except (ValueError, ArithmeticError):
            continue
    return out


def round_bounds(items: Sequence[tuple[int, ObservedNoise | None, NoiseObservation | str | None]],
                 ) -> list[float | None]:
    """The bound each ``(client, its running bound so far or None, observation)`` of a round
    will fold (:meth:`ObservedNoise.add`'s ``bound``), at the client's next level, those of a
    declaration's replies found together (:func:`lower_bounds`); None for a reason, a change
    of law, a client seen twice, or a bound that fails (``add`` then finds it or says why)."""
    out: list[float | None] = [None] * len(items)
    todo: list[tuple[int, NoiseObservation, float]] = []
    seen: set[int] = set()
    for i, (client, state, obs) in enumerate(items):
        state = ObservedNoise() if state is None else state
        if isinstance(obs, NoiseObservation) and client not in seen and state.law in (
                None, obs.law):
            todo.append((i, obs, state.level()))
        seen.add(client)
    for (i, _, _), value in zip(todo, lower_bounds([(o, b) for _, o, b in todo]), strict=True):
        out[i] = value
    return out


Observer = Callable[[ClientUpdate], "NoiseObservation | str"]
"""A declared mechanism's observation of a recovered update (``Mechanism.observe``)."""


def _observation(update: ClientUpdate, law: str, norm_ord: int, clip: float,
                 step_noise: float, norm: float | None = None) -> NoiseObservation | str:
    """``‖u‖/C`` less the rounding slack, which is bounded as the reply check bounds it
    (:mod:`~fedpriv.verification.roundoff`; ``step_noise`` a bound on one step's noise norm
    in that norm); not observable where the norm or the slack overflows float64 (a hostile
    update: an infinite norm would read as infinite noise, ε_observed ≈ 0). ``norm``: ``‖u‖``
    where the caller took it already (:func:`gaussian_norms`)."""
    p, records = update.dim, update.records
    most = records.upper_quantile(ROUNDOFF_RISK)
    tolerance = norm_tolerance(p, most, update.unit_roundoff)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is inf: refused below
        step = (step_noise + clip * (1.0 + tolerance) * most) / update.batch_size
        slack = update.batch_size * update.summed_error(norm_ord, step)
        if norm is None:
            u = update.noisy_sum
            # summed in numpy, not by BLAS: a multithreaded dot costs more than the pass on
            # busy cores
            norm = (float(np.abs(u).sum()) if norm_ord == 1
                    else math.sqrt(float(np.square(u).sum())))
    if not (math.isfinite(norm) and math.isfinite(slack)):
        return "not observable: the update's norm or its rounding slack overflows float64"
    return NoiseObservation(law, max(0.0, norm - slack) / clip, p, update.steps,
                            records.trials, records.rate, tolerance)


def observe_gaussian(update: ClientUpdate, *, clip_bound: float,
                     noise_multiplier: float) -> NoiseObservation | str:
    """The Gaussian mechanism's observation (ℓ2; the declared σ only sizes the rounding
    slack, as in :func:`~fedpriv.verification.verify_gaussian`)."""
    c = check_positive("clip_bound", clip_bound)
    step = noise_multiplier * c * chi_roundoff_quantile(update.dim)
    return _observation(update, "gaussian", 2, c, step)


def observe_gaussian_many(updates: Sequence[ClientUpdate], *, clip_bound: float,
                          noise_multiplier: float) -> list[NoiseObservation | str]:
    """:func:`observe_gaussian` of each update, in order, for updates recovered under one
    declaration: the ℓ2 norms taken :data:`~fedpriv.verification.update.BLOCK` at a time
    (:func:`gaussian_norms`), the same values bit for bit."""
    c = check_positive("clip_bound", clip_bound)
    norms = gaussian_norms(updates)
    return [_observation(update, "gaussian", 2, c,
                         noise_multiplier * c * chi_roundoff_quantile(update.dim), norm)
            for update, norm in zip(updates, norms, strict=True)]


def gaussian_norms(updates: Sequence[ClientUpdate]) -> list[float]:
    """``‖u‖₂`` of each update as :func:`_observation` takes it, ``√(Σ u_i²)`` summed by numpy
    (each row's pairwise sum is the vector's), a block of updates at a time."""
    norms: list[float] = []
    for start in range(0, len(updates), BLOCK):
        part = updates[start:start + BLOCK]
        u = np.stack([update.summed for update in part])
        with np.errstate(over="ignore", invalid="ignore"):
            u *= np.array([update.batch_size for update in part])[:, None]  # noisy_sum
            np.square(u, out=u)
            norms += [math.sqrt(x) for x in np.add.reduce(u, axis=1).tolist()]
    return norms


def observe_laplace(update: ClientUpdate, *, clip_bound: float,
                    laplace_scale: float) -> NoiseObservation | str:
    """The Laplace mechanism's observation (ℓ1; the declared λ only sizes the rounding
    slack, as in :func:`~fedpriv.verification.verify_laplace`)."""
    c = check_positive("clip_bound", clip_bound)
    if update.steps > MAX_LAPLACE_STEPS:
        return f"not observable: more than {MAX_LAPLACE_STEPS} local steps for the Laplace bound"
    step = laplace_scale * c * gamma_roundoff_quantile(update.dim)
    return _observation(update, "laplace", 1, c, step)
