"""An independent lower bound on the ε of a composed 1-D mechanism: floor-rounded buckets.

Each direction (upper law against lower law) is a non-decreasing privacy loss ``ℓ(x)`` of a
scalar statistic ``x``. Every loss is rounded DOWN to the grid ``kh`` — the interval of ``x``
between two crossings of the grid lies in one bucket, its exact mass comes from the upper law
(a closed-form CDF, or 8-point Gauss–Legendre in ``x`` itself) — and mass the window leaves out
is dropped. ``δ(ε) = E[(1 − e^{ε − ΣL})₊]`` only grows with the losses, so the T-fold
composition of this PMF gives ``δ_low(ε) ≤ δ(ε)`` at every ε, hence ``ε_low ≤ ε`` at any δ: a
rigorous lower bound on the exact ε, about ``T·h/2`` below it. It shares no code with
``fedpriv.accounting`` (not the θ-parametrisation, not connect-the-dots); only the FFT
self-convolution is dp-accounting's (``pld.common.self_convolve``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from dp_accounting.pld import common
from scipy import optimize, special

_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)


@dataclass(frozen=True)
class Direction:
    """A non-decreasing loss of ``x`` on ``support``; ``mass(a, b)`` is the upper law's mass."""

    loss: Callable[[np.ndarray], np.ndarray]
    inverse: Callable[[np.ndarray], np.ndarray]  # x where the loss reaches each value
    mass: Callable[[np.ndarray, np.ndarray], np.ndarray]
    support: tuple[float, float]
    cells: int = 1 << 16


def floor_pmf(way: Direction, h: float) -> tuple[int, np.ndarray]:
    """``k_lo`` and the masses of ``ℓ`` rounded down to ``kh``."""
    lo, hi = way.support
    k_lo = math.floor(float(way.loss(np.array([lo]))[0]) / h)
    k_hi = math.ceil(float(way.loss(np.array([hi]))[0]) / h)
    crossings = np.clip(way.inverse(np.arange(k_lo, k_hi + 1) * h), lo, hi)
    breaks = np.unique(np.concatenate([np.linspace(lo, hi, way.cells + 1), crossings]))
    a, b = breaks[:-1], breaks[1:]
    bucket = np.floor(way.loss(a) / h).astype(np.int64) - k_lo
    probs = np.bincount(np.clip(bucket, 0, None), way.mass(a, b), k_hi - k_lo + 1)
    return k_lo, probs


def epsilon_lower_bound(ways: Sequence[Direction], steps: int, delta: float, h: float) -> float:
    """ε at ``delta`` of the ``steps``-fold composition, a lower bound (module docstring)."""
    best = 0.0
    for way in ways:
        k_lo, probs = floor_pmf(way, h)
        offset, composed = common.self_convolve(probs, steps, 1e-15)
        losses = (steps * k_lo + offset + np.arange(len(composed))) * h
        best = max(best, _epsilon(losses, np.maximum(np.asarray(composed), 0.0), delta))
    return best


def _epsilon(losses: np.ndarray, probs: np.ndarray, delta: float) -> float:
    """The ε ≥ 0 where ``Σ_{ℓ_i > ε} p_i (1 − e^{ε − ℓ_i})`` falls to ``delta`` (0 if it never
    exceeds it)."""

    def excess(eps: float) -> float:
        j = int(np.searchsorted(losses, eps, side="right"))
        return float(np.dot(probs[j:], -np.expm1(eps - losses[j:]))) - delta

    if excess(0.0) <= 0.0:
        return 0.0
    return optimize.brentq(excess, 0.0, float(losses[-1]), xtol=1e-12 * float(losses[-1]))


def _gl_mass(log_density: Callable[[np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray,
             shift: float) -> np.ndarray:
    points = (a + b)[:, None] / 2 + (b - a)[:, None] / 2 * _GL_X
    return (np.exp(log_density(points) - shift) @ _GL_W) * (b - a) / 2


def vmf_directions(kappa: float, dim: int, q: float) -> list[Direction]:
    """Remove (U vs Q, statistic t) and add (Q vs U, statistic −t) of the subsampled VMF pair,
    with the densities ``∝ e^{±κt}(1−t²)^{(p−3)/2}`` integrated in ``t``."""
    m = (dim - 3) / 2

    def log_density(t: np.ndarray, sign: int) -> np.ndarray:
        return sign * kappa * t + (m * np.log1p(-t * t) if m else 0.0)

    grid = np.linspace(-1, 1, 400_001)[1:-1]
    keep = np.zeros(grid.shape, bool)
    shift = {}
    for s in (1, -1):
        values = log_density(grid, s)
        shift[s] = float(values.max())
        keep |= values > shift[s] - 90.0
    step = grid[1] - grid[0]
    lo, hi = max(-1.0, grid[keep][0] - step), min(1.0, grid[keep][-1] + step)
    edges = np.linspace(lo, hi, 1 << 16)
    total = {s: float(np.sum(_gl_mass(lambda t, s=s: log_density(t, s), edges[:-1], edges[1:],
                                      shift[s]))) for s in (1, -1)}

    def law(s: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        return lambda a, b: _gl_mass(lambda t: log_density(t, s), a, b, shift[s]) / total[s]

    def big_l(t: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.logaddexp(np.log1p(-q), math.log(q) + 2 * kappa * t)

    def t_of(value: np.ndarray) -> np.ndarray:  # L(t) = value; −1 where no t reaches it
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = (np.log(np.exp(value) - (1 - q)) - math.log(q)) / (2 * kappa)
        return np.nan_to_num(t, nan=-1.0, neginf=-1.0)

    remove = Direction(big_l, t_of, lambda a, b: q * law(1)(a, b) + (1 - q) * law(-1)(a, b),
                       (lo, hi))
    add = Direction(lambda x: -big_l(-x), lambda v: -t_of(-v),
                    lambda a, b: law(-1)(-b, -a), (-hi, -lo))
    return [remove] if q == 1.0 else [remove, add]


def laplace_directions(scale: float, q: float) -> list[Direction]:
    """Remove and add of the subsampled Laplace pair ``Lap(1, λ)`` vs ``Lap(0, λ)`` (exact CDFs)."""
    lam = scale

    def cdf(x: np.ndarray, centre: float) -> np.ndarray:
        z = (x - centre) / lam
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))

    def sf(x: np.ndarray, centre: float) -> np.ndarray:
        return cdf(2 * centre - x, centre)

    def interval(centre: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        return lambda a, b: np.where(a > centre, sf(a, centre) - sf(b, centre),
                                     cdf(b, centre) - cdf(a, centre))

    def big_l(x: np.ndarray) -> np.ndarray:
        base = (np.abs(x) - np.abs(x - 1)) / lam
        with np.errstate(divide="ignore"):
            return np.logaddexp(np.log1p(-q), math.log(q) + base)

    def x_of(value: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            base = np.log((np.exp(value) - (1 - q)) / q)
        return np.clip(np.nan_to_num((base * lam + 1) / 2, nan=0.0), 0.0, 1.0)

    width = 60 * lam + 1
    support = (-width, 1 + width)
    remove = Direction(big_l, x_of,
                       lambda a, b: q * interval(1.0)(a, b) + (1 - q) * interval(0.0)(a, b),
                       support)
    add = Direction(lambda x: -big_l(-x), lambda v: -x_of(-v),
                    lambda a, b: interval(0.0)(-b, -a), (-support[1], -support[0]))
    return [remove] if q == 1.0 else [remove, add]


def gaussian_composed_epsilon(sigma: float, steps: int, delta: float) -> float:
    """Exact ε of ``steps`` unsubsampled Gaussian releases: the Gaussian with ``μ = √T/σ``,
    ``δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)`` (Balle & Wang 2018, Thm 8), in log space."""
    mu = math.sqrt(steps) / sigma

    def excess(eps: float) -> float:
        first = special.log_ndtr(mu / 2 - eps / mu)
        second = eps + special.log_ndtr(-mu / 2 - eps / mu)
        return math.exp(first) * -math.expm1(second - first) - delta

    return optimize.brentq(excess, 0.0, mu * mu + 50 * mu, xtol=1e-13 * mu * mu)


#: How far above a PLD on dp-accounting's default grid (Δ = 1e-4) fedpriv's may lie: its grid is
#: a hundredth of one release's loss spread where that is coarser (fedpriv.accounting.pld_grid,
#: bias below 2.5e-5 relative), and pessimistic, so never below.
PLD_GRID_REL = 5e-5


def assert_pessimistic_close(mine: float, reference: float, rel: float = PLD_GRID_REL) -> None:
    """``mine`` is an upper bound on ``reference`` (to round-off) and within ``rel`` of it."""
    assert reference * (1.0 - 1e-9) <= mine <= reference * (1.0 + rel), (mine, reference)
