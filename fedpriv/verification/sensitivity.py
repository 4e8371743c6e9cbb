"""Per-record sensitivity by replay, and the freshness of a round's step noises (issue 42).

**Replay** (test ``"sensitivity"``). With the labelled simulation oracle on
(``audit.ground_truth``) the server knows, for a release ``r = (Σ_{i∈B} ḡ_i + N)/L``, the
parameters ``θ`` it was computed at and the records ``B`` it used, so it recomputes the clipped
signal ``S = Σ_{i∈B} ḡ_i(θ)/L`` exactly (per-example clipping to the declared ``C``, divided by
the declared ``L``; ``strategies/sensitivity_replay.py``) and tests the *residual*
``R = r − S`` as the declared noise alone: for the Gaussian mechanism ``R ~ N(0, s²I_p)``,
``s = σC/L``, with no signal to allow for — full power, not the quadrature sandwich of
privacy-math.md §9 whose low side must leave room for a signal of norm up to ``C·B``.

Under the declaration every statistic below has a known law whatever ``θ`` and the data are,
because the noise is drawn after them; each is tested two-sided at ``α/m`` (Bonferroni over the
``m`` statistics, so a release's false-alarm rate is ≤ α):

* ``‖R‖²/s² ~ χ²_p`` — the noise's scale (too little noise, or a signal left over in any
  direction);
* ``⟨R, u⟩/s ~ N(0, 1)`` for each *alternative direction* ``u`` (unit, fixed by ``θ`` and the
  data alone): the declared signal ``S`` (a scaled signal leaves ``(a − 1)S``), the
  unclipped excess ``Σ_{i∈B}(g_i − ḡ_i)`` (no clipping leaves exactly it), and the clipped
  mean gradient over the client's whole partition (hidden local steps leave the signals of
  further batches, which point along it while the steps move θ little — or against it, where
  a large step overshoots: measured z ≈ −9 along ``S`` at σ = 0.5). All two-sided.

**Laplace** (``law="laplace"``, the record-level Laplace mechanism: ``R`` has iid
Laplace(``b``) coordinates, ``b = λC/L``). The norm is ``‖R‖₁/b ~ Gamma(p, 1)`` (exact, two-sided);
each projection ``⟨R, u⟩/b`` (unit ``u``) is a weighted sum of Laplace(1)'s, whose tail is bounded
by Chernoff with its exact MGF ``Π_i 1/(1 − t²u_i²)`` (valid at every ``t``; :func:`_laplace_tail`).
Their ``z``'s (``⟨R, u⟩/(√2·b)``, variance 1) are reported, not added across rounds: the
cross-round test's normal law is the Gaussian's. The signal factor ``a*`` is found at the
projection's own Chernoff threshold (:func:`_laplace_signal_factor`; the power side by the
normal approximation of a sum of many Laplace variables); ``f*`` is Gamma's, exact.

**The noise law on the residual** (:func:`residual_law_test`, issue 42 item 4). Without the
replay the law's light-tail side must leave room for a signal of ``C·B`` and is often not
applicable; the residual carries no signal, so the sides are tested at full power: Gaussian —
``Σ_i (|R_i|/s − τ)₊`` against its lower quantile (bounded noise of the declared variance
leaves it ≈ 0) and, the heavy side, ``‖R‖₁/s`` against its (Laplace noise of the declared
variance has ``E‖N‖₁ = p·s/√2`` against ``p·s·√(2/π)``); Laplace — ``‖R‖₂/b`` against its lower
quantile (Gaussian noise of the same ``E|N_i|`` has ``‖N‖₂² ≈ (π/2)·p·b²`` against ``2p·b²``).
Each is the update's own test (``gaussian-light-tail``, ``gaussian-shape``, ``laplace-shape``,
speaking to ``noise-law``) on the residual, in steps mode each step's at ``α/k``.

**Across rounds** (test ``"sensitivity-rounds"``, :func:`cumulative_test`). Each release's
``z_u`` is N(0, 1) given everything before its noise, so a client's successive ``z``'s are
independent N(0, 1) under the declaration (a martingale-difference argument: the direction is
fixed before the noise it is tested against). A cheat that leaves a small, same-signed push
every release (no clipping while gradients barely exceed C, a signal scaled × 2) is caught by
``|Σ_j z_j|/√n`` on the signal and unclipped directions, and hidden steps, whose push may
change sign, by ``Σ_j z_j²`` on the partition direction (``χ²_n``). The ``j``-th look at a
client is tested at ``α/(j(j+1))`` (these sum to α over the run).

A client-round's sensitivity tests spend α/2 per round (Bonferroni over its ``m``
statistics, and over the ``k`` steps in steps mode) and α/2 across rounds.

A bound ``slack`` on the residual's rounding error (the client's float32 arithmetic against the
server's float64 replay) widens every test (the p-values stay valid).

**Power in ε.** A release whose signal is scaled by ``a`` is the declared mechanism at noise
multiplier ``σ/a``; one whose noise is scaled by ``f`` is at ``σf``. The projection on ``S``
catches ``a ≥ a*`` with probability :data:`~fedpriv.verification.power.DETECTION_POWER`,
``a* = 1 + (z_{1−α/2m} + z_{0.99} + slack/s)·s/‖S‖``; the norm test catches ``f ≤ f*``,
``f* = √(χ²_p⁻¹(α/2m)/χ²_p⁻¹(0.99))``. Mapped through the run's accountant (the caller's
``epsilon_at(σ')``, the client-round's own release), the stated powers are the noise
scale's ``ε(σf*)/ε(σ)`` (``detectable_epsilon_ratio``: less noise that makes this release's ε
that many times the reported one or more is caught with probability 0.99) and the signal
scale's ``ε(σ/a*)/ε(σ)`` (``signal_epsilon_ratio``); the server maps them through the RDP
accountant at the run's δ (``strategies/sensitivity_replay.py``: a PLD route per client-round
costs ~1 s). The label asks both to be at most :data:`USEFUL_EPSILON_RATIO` (2), as the
issue defines useful power (:mod:`fedpriv.verification.properties`). No test of one release
can do better on the second than the projection on ``S`` (the most powerful test of that
alternative), and while the clipped signal is small beside the noise (``‖S‖/s`` ≈ 2 in the
paper MLP's first rounds at σ = 2, B = 16) a signal scaled by less than ``a*`` ≈ 5 passes, so
there only the committed noise (:mod:`fedpriv.verification.committed`) makes the property
useful.

**Freshness within a round** (test ``"step-freshness"``, steps mode). Step ``t``'s release is
``r_t = X + N_t/L`` with ``X`` (its signal, and everything before) drawn before ``N_t``; its
distance from the span of the earlier steps' releases ``r_{t−W} … r_{t−1}`` is at least that
of ``N_t/L`` in law (Anderson's theorem, as across rounds: :mod:`~fedpriv.verification.replay`),
so a distance below the ``α/(k−1)`` quantile of ``s·χ_{p−d}`` refutes fresh noise. Noise
``+z`` at one step and ``−z`` at the next leaves only the two signals: caught; honest noise
never below the quantile more often than ``α``. Needs no oracle.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

from fedpriv.verification.gaussian import LAW, LIGHT_TAIL_CUT
from fedpriv.verification.laws import (
    ChiNorm,
    GammaNorm,
    NormLaw,
    gaussian_excess_law,
    gaussian_l1_law,
    laplace_l2_law,
    lower_quantile,
)
from fedpriv.verification.power import DETECTION_POWER
from fedpriv.verification.replay import distance_from_span
from fedpriv.verification.verdict import Verdict, decide, unverifiable

__all__ = [
    "FRESH_WINDOW",
    "SPEAKS_TO",
    "USEFUL_EPSILON_RATIO",
    "ReplayedRelease",
    "cumulative_test",
    "detectable_ratios",
    "residual_law_test",
    "sensitivity_test",
    "step_freshness_test",
    "steps_sensitivity",
]

SPEAKS_TO = ("sensitivity",)
"""The property the replay's tests speak to (:attr:`Verdict.speaks_to`)."""

USEFUL_EPSILON_RATIO = 2.0
"""The sensitivity test is useful when less noise that makes the release's true ε this many
times the reported one is caught with probability 0.99 (module docstring)."""
_GRID = 1.05
FRESH_WINDOW = 8
"""``W``: each step's release is tested against the span of the previous ``W`` steps'."""


@dataclass(frozen=True)
class ReplayedRelease:
    """What the server recomputed of one release.

    Attributes
    ----------
    signal
        ``S = Σ_{i∈B} ḡ_i(θ)/L`` (float64, shape ``(p,)``).
    directions
        Alternative directions (not necessarily unit; a zero vector is skipped), each fixed by
        ``θ`` and the data alone.
    slack
        A bound on the ℓ2 rounding error of the residual.
    """

    signal: np.ndarray
    directions: Mapping[str, np.ndarray] = field(default_factory=dict)
    slack: float = 0.0


def _norm_p(law: NormLaw, norm: float, scale: float, slack: float) -> float:
    """Two-sided p-value of ``norm/scale`` under ``law`` (:class:`~fedpriv.verification.laws.
    ChiNorm` for the Gaussian's ℓ2 norm, :class:`~fedpriv.verification.laws.GammaNorm` for the
    Laplace's ℓ1 norm), the rounding ``slack`` (in the law's norm) given to each side."""
    low = law.cdf((norm + slack) / scale)
    high = law.sf(max(norm - slack, 0.0) / scale)
    return float(min(1.0, 2.0 * min(low, high)))


def _laplace_tail(x: float, u: np.ndarray) -> float:
    """A bound on ``P(|⟨V, u⟩| ≥ x)``, ``V`` iid Laplace(1), ``u`` unit: twice
    ``exp(−t·x − Σ_i log(1 − t²u_i²))`` at the best ``t`` in ``[0, 1/max|u_i|)`` (Chernoff with
    the exact MGF; every ``t`` gives a bound, so the optimiser costs power, never validity)."""
    if x <= 0:
        return 1.0
    u2 = u * u
    top = 1.0 / math.sqrt(float(u2.max()))

    def exponent(t: float) -> float:
        return -t * x - float(np.sum(np.log1p(-(t * t) * u2)))

    best = optimize.minimize_scalar(exponent, bounds=(0.0, top * (1 - 1e-9)), method="bounded",
                                    options={"xatol": 1e-10 * top})
    return float(min(1.0, 2.0 * math.exp(min(0.0, float(best.fun)))))


def _laplace_signal_factor(u: np.ndarray, level: float, slack: float, signal: float) -> float:
    """``a*`` of a Laplace release: the signal factor the projection on ``u`` (the clipped
    signal's direction) catches with probability :data:`DETECTION_POWER`. The test refutes at
    ``|t| − slack ≥ x*``, ``x*`` where :func:`_laplace_tail` falls to ``level`` (the bound
    the test uses, so never below the normal quantile's threshold); a signal scaled by ``a``
    moves ``t`` by ``(a − 1)·signal`` (``signal`` = ``‖S‖/b``) beside noise of variance 2,
    whose 0.99 quantile is taken as the normal's (a sum of p weighted Laplace variables: the
    power side only, stated, not a level)."""
    if signal <= 0:
        return math.inf
    high = math.log(2.0 / level) + 10.0
    while _laplace_tail(high, u) > level:
        high *= 2.0
    x = optimize.brentq(lambda t: _laplace_tail(t, u) - level, 0.0, high, xtol=1e-6)
    return 1.0 + (x + slack + stats.norm.ppf(DETECTION_POWER) * math.sqrt(2.0)) / signal


def detectable_ratios(
    signal_norm: float, noise_std: float, dim: int, level: float, slack: float = 0.0,
    law: str = "gaussian",
) -> tuple[float, float]:
    """``(a*, f*)`` of the module docstring: the smallest signal factor and the largest noise
    fraction caught with probability :data:`DETECTION_POWER` by two-sided tests at ``level``
    each. ``noise_std`` is the noise's scale per coordinate (Laplace: ``b``, std ``√2·b``;
    ``slack`` then in ℓ1 for ``f*``)."""
    std = noise_std * (math.sqrt(2.0) if law == "laplace" else 1.0)
    z = stats.norm.isf(level / 2.0) + stats.norm.ppf(DETECTION_POWER) + slack / noise_std
    a = math.inf if signal_norm <= 0 else 1.0 + z * std / signal_norm
    if law == "laplace":
        low = stats.gamma.ppf(level / 2.0, dim) - slack / noise_std
        return a, float(max(low, 0.0) / stats.gamma.ppf(DETECTION_POWER, dim))
    low = math.sqrt(stats.chi2.ppf(level / 2.0, dim)) - slack / noise_std
    f = max(low, 0.0) / math.sqrt(stats.chi2.ppf(DETECTION_POWER, dim))
    return float(a), float(f)


def _epsilon_ratios(epsilon_at: Callable[[float], float] | None, sigma: float, a: float,
                    f: float) -> dict[str, float]:
    """``{"detectable_epsilon_ratio": ε(σf*)/ε(σ), "signal_epsilon_ratio": ε(σ/a*)/ε(σ)}``
    (empty without ``epsilon_at`` or a finite positive ε at ``σ``)."""
    if epsilon_at is None:
        return {}
    base = epsilon_at(sigma)
    if not base > 0 or not math.isfinite(base):
        return {}
    # a* up and f* down to a 5 % grid: the ratios only grow (conservative), and the accountant
    # sees few distinct noise multipliers in a run (it keeps each ledger's ε; a subsampled RDP
    # curve at a new small σ costs ~0.2 s)
    a = _GRID ** math.ceil(math.log(a, _GRID)) if math.isfinite(a) and a > 1 else a
    f = _GRID ** -math.ceil(-math.log(f, _GRID)) if 0 < f < 1 else f
    noise = math.inf if f <= 0 else epsilon_at(sigma * f) / base
    signal = math.inf if not math.isfinite(a) else epsilon_at(sigma / a) / base
    return {"detectable_epsilon_ratio": noise, "signal_epsilon_ratio": signal}


def sensitivity_test(
    release: np.ndarray, replayed: ReplayedRelease, *, noise_std: float,
    noise_multiplier: float, alpha: float,
    epsilon_at: Callable[[float], float] | None = None, law: str = "gaussian",
) -> Verdict:
    """Test ``"sensitivity"`` of one Gaussian (or, ``law="laplace"``, Laplace) release against
    its replayed signal (module docstring).

    Parameters
    ----------
    release
        The release ``r`` as the server recovered it (float64, shape ``(p,)``).
    replayed
        The recomputed signal, the alternative directions and the rounding slack.
    noise_std
        ``s = σC/L``: the declared noise std per coordinate of ``r`` (Laplace: its scale
        ``b = λC/L``).
    noise_multiplier
        ``σ`` (Laplace: ``λ``), for the power in ε.
    alpha
        False-alarm rate of the release's test.
    epsilon_at
        ``σ' ↦ ε`` of this release at noise multiplier ``σ'`` (the run's accountant); None:
        power stated as factors only.
    """
    r = np.asarray(release, np.float64)
    residual = r - replayed.signal
    p, s, e = r.size, float(noise_std), float(replayed.slack)
    units = {name: u / n for name, u in replayed.directions.items()
             if math.isfinite(n := float(np.linalg.norm(u))) and n > 0}
    m = 1 + len(units)
    laplace = law == "laplace"
    if laplace:  # ‖R‖₁/b ~ Gamma(p, 1); slack in ℓ1 ≤ √p × its ℓ2 bound
        norm, expected, e_norm = (float(np.abs(residual).sum()), s * p, e * math.sqrt(p))
        p_values = {"norm": _norm_p(GammaNorm(p), norm, s, e_norm)}
    else:
        norm, expected, e_norm = float(np.linalg.norm(residual)), s * math.sqrt(p), e
        p_values = {"norm": _norm_p(ChiNorm(p), norm, s, e)}
    stat: dict[str, float] = {"residual_norm_in_noise": norm / expected,
                              "tests": float(m), "slack_in_noise": e / s}
    for name, u in units.items():
        if laplace:  # reported standardised (variance 1), tested by its Chernoff bound
            t = float(residual @ u) / s
            stat[f"t_{name}"] = z = t / math.sqrt(2.0)
            p_values[name] = _laplace_tail(max(abs(t) - e / s, 0.0), u)
            continue
        z = float(residual @ u) / s
        stat[f"z_{name}"] = z
        p_values[name] = float(2.0 * stats.norm.sf(max(abs(z) - e / s, 0.0)))
    worst = min(p_values, key=p_values.__getitem__)
    p_value = min(1.0, m * p_values[worst])
    signal_norm = float(np.linalg.norm(replayed.signal))
    a, f = detectable_ratios(signal_norm, s, p, alpha / m, e_norm, law)
    if laplace and "signal" in units:  # the projection's own (Chernoff) threshold, not Φ's
        a = _laplace_signal_factor(units["signal"], alpha / m, e / s, signal_norm / s)
    stat.update(signal_in_noise=signal_norm / s, detectable_signal_factor=a,
                detectable_noise_fraction=f)
    stat.update(_epsilon_ratios(epsilon_at, noise_multiplier, a, f))
    what = {"norm": "the residual's norm is not the declared noise's",
            "signal": "the residual points along the clipped signal (a scaled signal)",
            "unclipped": "the residual points along the unclipped excess (no clipping)",
            "partition": "the residual points along the client's mean clipped gradient "
                         "(signal of records or steps not declared)"}
    return decide(
        "sensitivity", p_value, alpha, stat, speaks_to=SPEAKS_TO,
        passed=f"the update less its replayed clipped signal is the declared {law} noise "
               f"(residual {norm / expected:.4g} × its expected norm)",
        failed=f"the update less its replayed clipped signal is not the declared noise: "
               f"{what.get(worst, worst)} ({worst}: "
               + (f"z = {stat.get(('t_' if laplace else 'z_') + worst, 0.0):.3g}"
                  if worst != "norm" else f"{norm / expected:.4g} × expected") + ")",
    )


def _lower_tail(name: str, what: str, law: str, values: list[float], p_values: list[float],
                expected: float, alpha: float, applicable: bool, tails: str) -> Verdict:
    """One lower-tail side over a round's ``k`` residuals (each at ``α/k``)."""
    k, t = len(values), int(np.argmin(p_values))
    p_value = min(1.0, k * p_values[t])
    stat = {"statistic": values[t], "expected": expected, "replayed": 1.0, "steps": float(k)}
    verdict = decide(
        name, p_value, alpha, stat, speaks_to=LAW,
        passed=f"replayed residual: {what} = {values[t]:.4g} fits {law} noise (expected "
               f"{expected:.4g})",
        failed=f"replayed residual: {what} = {values[t]:.4g} is too small for {law} noise "
               f"(expected {expected:.4g}): {tails}",
    )
    if verdict.status == "consistent" and not applicable:
        return unverifiable(name, "not applicable on the residual: the rounding slack could "
                            "hide the alternative", {**stat, "p_value": p_value}, LAW)
    return verdict


def residual_law_test(residuals: list[tuple[np.ndarray, float]], scale: float, law: str,
                      alpha: float) -> list[Verdict]:
    """The noise law's sides on the replayed residuals (module docstring): each ``(R, slack)``
    — ``slack`` an ℓ2 bound on its rounding — tested at ``α/k``; the tests are named as the
    update's own (``gaussian-light-tail`` and ``gaussian-shape``, or ``laplace-shape``),
    speaking to ``noise-law``. ``scale``: the Gaussian's std ``s`` or the Laplace's ``b`` per
    coordinate. ``unverifiable`` where a side would not catch its alternative (bounded noise
    of the declared variance, Laplace noise of the Gaussian's, Gaussian noise of the Laplace's
    ``E|N_i|``) even with the slack."""
    p = int(np.asarray(residuals[0][0]).size)
    level, root = alpha / len(residuals), math.sqrt(p)
    if law == "laplace":  # Gaussian of the same E|N_i| = b: ‖N‖₂ ≈ b·√(πp/2)
        l2 = laplace_l2_law(p)
        values = [float(np.linalg.norm(r)) / scale for r, _ in residuals]
        cdf = [l2.cdf(v + e / scale) for v, (_, e) in zip(values, residuals, strict=True)]
        applicable = 1.01 * math.sqrt(math.pi * p / 2.0) + max(e for _, e in residuals) / scale \
            < lower_quantile(l2, level, math.sqrt(2.0 * p))
        return [_lower_tail("laplace-shape", "‖R‖₂/b", law, values, cdf, math.sqrt(2.0 * p),
                            alpha, applicable, "lighter tails")]
    slack = max(e for _, e in residuals) * root / scale  # in ℓ1, in noise stds
    excess = gaussian_excess_law(p, LIGHT_TAIL_CUT)
    values = [float(np.maximum(np.abs(r) / scale - LIGHT_TAIL_CUT, 0.0).sum())
              for r, _ in residuals]
    cdf = [excess.cdf(v + e * root / scale) for v, (_, e) in zip(values, residuals, strict=True)]
    # bounded noise of the declared variance (|N_i| ≤ √3·s < τs) leaves only the slack
    light = _lower_tail("gaussian-light-tail", f"Σ(|R_i|/s − {LIGHT_TAIL_CUT:g})₊", law, values,
                        cdf, p * excess.mean, alpha, excess.cdf(slack) <= level,
                        "lighter tails (bounded noise)")
    l1 = gaussian_l1_law(p)  # Laplace noise of the declared variance: E‖N‖₁ = p·s/√2
    values = [float(np.abs(r).sum()) / scale for r, _ in residuals]
    cdf = [l1.cdf(v + e * root / scale) for v, (_, e) in zip(values, residuals, strict=True)]
    heavy = _lower_tail("gaussian-shape", "‖R‖₁/s", law, values, cdf,
                        p * math.sqrt(2.0 / math.pi), alpha,
                        1.01 * p / math.sqrt(2.0) + slack < lower_quantile(
                            l1, level, p * math.sqrt(2.0 / math.pi)),
                        "heavier tails")
    return [light, heavy]


def cumulative_test(evidence: Mapping[str, tuple[float, float, int]], look: int,
                    alpha: float) -> Verdict:
    """Test ``"sensitivity-rounds"`` of a client's replayed releases so far (module docstring).

    Parameters
    ----------
    evidence
        Direction → ``(Σ z, Σ z², n)`` over the client's replayed releases.
    look
        How many times this client was tested so far, this time included (``j ≥ 1``).
    alpha
        The run's level for this test: the ``j``-th look is tested at ``α/(j(j+1))``.
    """
    level = alpha / (look * (look + 1))
    p_values: dict[str, float] = {}
    stat: dict[str, float] = {"look": float(look), "level": level}
    for name, (total, squares, n) in evidence.items():
        if n < 1:
            continue
        if name != "partition":
            z = total / math.sqrt(n)
            stat[f"sum_z_{name}"] = z
            p_values[name] = float(2.0 * stats.norm.sf(abs(z)))
        else:
            stat[f"sum_z2_{name}"] = squares
            p_values[name] = float(special.chdtrc(n, squares))
    if not p_values:
        return Verdict("sensitivity-rounds", "consistent", "no replayed release yet",
                       p_value=1.0, alpha=level, speaks_to=SPEAKS_TO)
    worst = min(p_values, key=p_values.__getitem__)
    p_value = min(1.0, len(p_values) * p_values[worst])
    count = int(max(n for _, _, n in evidence.values()))
    return decide(
        "sensitivity-rounds", p_value, level, stat, speaks_to=SPEAKS_TO,
        passed=f"over the client's {count} replayed releases the residuals show no push "
               "along the signal, the unclipped excess or the partition's gradient",
        failed=f"over the client's {count} replayed releases the residuals push along "
               f"{worst} (a scaled or unclipped signal, or records or steps not declared)",
    )


def steps_sensitivity(verdicts: list[Verdict], alpha: float) -> Verdict:
    """One ``"sensitivity"`` verdict of a round's ``k`` replayed steps, each tested at
    ``α/k``: inconsistent when any step is; p-value Bonferroni's ``min(1, k·min p_t)``; the
    power the weakest step's (its largest detectable ε-ratio)."""
    k = len(verdicts)
    p_value = min(1.0, k * min(v.p_value for v in verdicts))
    stat = {"steps": float(k)}
    for key in ("detectable_epsilon_ratio", "signal_epsilon_ratio",
                "detectable_signal_factor"):
        values = [v.statistic.get(key) for v in verdicts]
        if all(x is not None for x in values):
            stat[key] = max(values)
    bad = [t + 1 for t, v in enumerate(verdicts) if v.status == "inconsistent"]
    first = verdicts[bad[0] - 1] if bad else verdicts[0]
    reason = (f"{len(bad)} of {k} replayed steps inconsistent; step {bad[0]}: {first.reason}"
              if bad else f"all {k} replayed steps consistent; step 1: {first.reason}")
    return Verdict("sensitivity", "inconsistent" if bad else "consistent", reason,
                   p_value=p_value, alpha=alpha, statistic=stat, speaks_to=SPEAKS_TO)


def step_freshness_test(releases: np.ndarray, noise_std: float, alpha: float) -> Verdict:
    """Test ``"step-freshness"`` of a round's ``(k, p)`` step releases (module docstring):
    each step from the second on at ``α/(k−1)``; consistent (p = 1) for one step."""
    k, p = releases.shape
    if k < 2:
        return Verdict("step-freshness", "consistent", "one step: no earlier step in the round "
                       "to share noise with", p_value=1.0, alpha=alpha,
                       speaks_to=("fresh-noise",))
    tails, nearest, which = [], math.inf, 0
    for t in range(1, k):
        earlier = np.asarray(releases[max(0, t - FRESH_WINDOW):t], np.float64)
        distance, rank = distance_from_span(np.asarray(releases[t], np.float64), earlier)
        x = distance / noise_std
        tails.append(float(special.chdtr(p - rank, x * x)))
        if x < nearest:
            nearest, which = x, t + 1
    p_value = min(1.0, (k - 1) * min(tails))
    stat = {"distance_in_noise_stds": nearest, "steps": float(k),
            "expected": math.sqrt(p - 1.0)}
    return decide(
        "step-freshness", p_value, alpha, stat, speaks_to=("fresh-noise",),
        passed=f"every step's release is far from the span of the round's earlier steps "
               f"(nearest: step {which}, {nearest:.4g} noise stds)",
        failed=f"step {which}'s release is only {nearest:.4g} noise stds from the span of the "
               "round's earlier steps (expected about √p): its noise is not fresh (reused or "
               "cancelled within the round)",
    )
