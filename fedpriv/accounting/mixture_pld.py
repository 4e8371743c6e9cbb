"""The replace-one pair of a sampled additive-noise release, as a pessimistic PLD.

privacy-math.md §14. One position of the data is replaced; it takes part in the release with
probability ``q`` (Poisson sampling at rate ``q``, or a fixed-size sample of ``m`` of ``N``
without replacement, ``q = m/N``). In units of the sensitivity ``Δ`` the two outputs are the
ends of a ball of diameter ``2Δ``, and the tight pair is

    P = (1−q)·F(x) + q·F(x − 1)   against   Q = (1−q)·F(x) + q·F(x + 1),

``F`` the noise law at scale ``s`` (the Gaussian's σ, the Laplace's λ). The loss
``L(x) = log(dP/dQ)`` is non-decreasing in ``x`` for every symmetric log-concave law (its
numerator grows and its denominator shrinks in ``x``), and the pair is symmetric
(``P(x) = Q(−x)``), so the add direction has the remove direction's PLD. At ``q = 1`` it is the
unsampled release at twice the sensitivity. dp-accounting offers this pair for neither
sampling scheme (its PLD subsamples add/remove pairs only), so it is built here.

Discretisation: pessimistic connect-the-dots (Doroshenko et al., Algorithm 1, the rule
dp-accounting uses for its own Gaussian PLD and ``vmf_pld.py`` for the VMF), on the grid
``kΔ``. Between the points ``x_k = L⁻¹(kΔ)`` the loss lies in one cell ``[kΔ, (k+1)Δ]``, and the
weight the rule puts on ``(k+1)Δ``, ``w(ℓ) = (1 − e^{kΔ−ℓ})/(1 − e^{−Δ})``, integrates in
closed form because ``p(x)·e^{−L(x)} = q(x)``:

    ∫ p·w dx = (P[x_k, x_{k+1}] − e^{kΔ}·Q[x_k, x_{k+1}]) / (1 − e^{−Δ}),

so every mass is a difference of CDFs (each from its nearer tail), without quadrature. Mass
with loss below the grid is moved up to its bottom, mass above it is the infinite-loss mass:
the resulting pair dominates the true one, so every δ(ε) after any composition is an upper
bound.

References
----------
.. [1] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect the dots: tighter
   discrete approximations of privacy loss distributions", PETS 2022, Algorithm 1.
.. [2] Y.-X. Wang, B. Balle, S. Kasiviswanathan, "Subsampled Rényi differential privacy and
   analytical moments accountant", AISTATS 2019 (sampling without replacement, replace-one).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import special

from fedpriv.accounting.pld_grid import GridNeed, LossLaw, grid_pmf, resolve_discretization
from fedpriv.errors import InputError
from fedpriv.validate import check_dim, check_positive, check_rate

__all__ = ["NOISE_LAWS", "mixture_grid_need", "mixture_pld"]

NOISE_LAWS = ("gaussian", "laplace")
TAIL_MASS = 1e-18
_CELLS = 16_384
_BISECTIONS = 80


def _log_density(law: str, z: np.ndarray) -> np.ndarray:
    """Log-density of the standard law at ``z``, up to its constant (which cancels)."""
    return -0.5 * z * z if law == "gaussian" else -np.abs(z)


def _cdf(law: str, z: np.ndarray) -> np.ndarray:
    if law == "gaussian":
        return special.ndtr(z)
    return np.where(z < 0.0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.abs(z)))


def _quantile(law: str, p: float) -> float:
    """The standard law's ``p``-quantile, ``p < 1/2``."""
    return float(special.ndtri(p)) if law == "gaussian" else math.log(2.0 * p)


class _Pair:
    """The pair ``P = (1−q)F + qF(·−1)``, ``Q = (1−q)F + qF(·+1)`` at noise scale ``s``."""

    def __init__(self, law: str, scale: float, q: float) -> None:
        self.law, self.scale, self.q = law, scale, q
        self.log_keep = math.log1p(-q) if q < 1.0 else -math.inf
        self.log_q = math.log(q)
        z = -_quantile(law, TAIL_MASS)
        self.low, self.high = -scale * z, 1.0 + scale * z  # P beyond: ≤ TAIL_MASS a side

    def loss(self, x: np.ndarray) -> np.ndarray:
        """``L(x) = log(dP/dQ)(x)`` in log-space."""
        s, law = self.scale, self.law
        common = self.log_keep + _log_density(law, x / s)
        upper = np.logaddexp(common, self.log_q + _log_density(law, (x - 1.0) / s))
        lower = np.logaddexp(common, self.log_q + _log_density(law, (x + 1.0) / s))
        return upper - lower

    def _mass(self, a: np.ndarray, b: np.ndarray, shift: float) -> np.ndarray:
        """``F((b−shift)/s) − F((a−shift)/s)``, from the nearer tail."""
        za, zb = (a - shift) / self.scale, (b - shift) / self.scale
        return np.where(za > 0.0, _cdf(self.law, -za) - _cdf(self.law, -zb),
                        _cdf(self.law, zb) - _cdf(self.law, za))

    def masses(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(P[a, b], Q[a, b])``."""
        common = (1.0 - self.q) * self._mass(a, b, 0.0)
        return (common + self.q * self._mass(a, b, 1.0),
                common + self.q * self._mass(a, b, -1.0))

    def crossings(self, levels: np.ndarray) -> np.ndarray:
        """The least ``x`` in ``[low − 1, high + 1]`` with ``L(x) ≥ level`` per level
        (bisection; a level the loss never reaches there gives an end of the bracket)."""
        lo = np.full(levels.shape, self.low - 1.0)
        hi = np.full(levels.shape, self.high + 1.0)
        for _ in range(_BISECTIONS):
            middle = 0.5 * (lo + hi)
            above = self.loss(middle) >= levels
            hi, lo = np.where(above, middle, hi), np.where(above, lo, middle)
        return hi


def _checked(law: Any, scale: Any, sample_rate: Any, steps: Any) -> tuple[str, float, float, int]:
    if law not in NOISE_LAWS:
        raise InputError("noise law", law, f"one of {', '.join(NOISE_LAWS)}")
    scale = check_positive("noise scale", scale)
    if not 1e-4 <= scale <= 1e6:
        raise InputError("noise scale", scale, "a value in [1e-4, 1e6] for the replace-one PLD")
    return law, scale, check_rate("sample_rate", sample_rate), check_dim("steps", steps)


@lru_cache(maxsize=64)
def mixture_grid_need(law: str, scale: float, sample_rate: float, steps: int = 1) -> GridNeed:
    """Sizes of the ``steps``-fold composed replace-one PLD (for choosing Δ): the loss at the
    midpoints of 16,384 cells of ``[low, high]`` with their P-masses (one direction: the pair
    is symmetric).

    Raises
    ------
    InputError
        ``law`` not in :data:`NOISE_LAWS`, ``scale`` outside [1e-4, 1e6], ``sample_rate``
        outside (0, 1], ``steps`` not an integer ≥ 1.
    """
    law, scale, q, steps = _checked(law, scale, sample_rate, steps)
    pair = _Pair(law, scale, q)
    edges = np.linspace(pair.low, pair.high, _CELLS + 1)
    mass_p, _ = pair.masses(edges[:-1], edges[1:])
    ends = pair.loss(edges[[0, -1]])
    losses = pair.loss(0.5 * (edges[:-1] + edges[1:]))
    parameter = "noise_multiplier" if law == "gaussian" else "laplace_scale"
    return GridNeed((LossLaw(losses, mass_p, float(ends[0]), float(ends[1])),), steps,
                    parameter, scale)


def mixture_pld(
    law: str, scale: float, sample_rate: float, discretization: float | None = None, *,
    steps: int = 1, default: float = 1e-4,
) -> Any:
    """Pessimistic dp-accounting PLD of one replace-one release (module docstring).

    Parameters
    ----------
    law, scale
        The noise law (``"gaussian"``: σ; ``"laplace"``: λ), in units of the sensitivity.
    sample_rate
        ``q``: the probability that the replaced position takes part (``m/N`` for a fixed-size
        sample); 1 for an unsampled release.
    discretization
        Value discretisation Δ (``None``: ``default`` where it fits the point budget for
        ``steps`` compositions, else the finest that fits, :mod:`.pld_grid`).
    steps
        How many times the caller will compose it (sizes the grid).
    default
        The finest Δ used when ``discretization`` is None.
    """
    need = mixture_grid_need(law, scale, sample_rate, steps)
    step = resolve_discretization(need, discretization, default)
    from dp_accounting.pld import privacy_loss_distribution as pld

    pair = _Pair(law, need.value, float(sample_rate))
    ends = need.laws[0]
    # one level above the top: a bounded loss (the Laplace's atoms) lies inside the grid
    k_lo, k_hi = math.floor(ends.low / step), math.ceil(ends.high / step) + 1
    points = pair.crossings(np.arange(k_lo, k_hi + 1) * step)
    mass_p, mass_q = pair.masses(points[:-1], points[1:])
    cells = np.arange(k_lo, k_hi) * step
    up = np.clip((mass_p - np.exp(cells) * mass_q) / -math.expm1(-step), 0.0, mass_p)
    probs = np.zeros(k_hi - k_lo + 1)
    probs[1:] += up
    probs[:-1] += mass_p - up
    below, _ = pair.masses(np.array([-np.inf]), points[:1])
    above, _ = pair.masses(points[-1:], np.array([np.inf]))
    # loss below x_0 (below k_lo·Δ, or below L(x_0) where the bracket ended first), moved up
    slot = min(max(math.ceil(float(pair.loss(points[:1])[0]) / step) - k_lo, 0), probs.size - 1)
    probs[slot] += float(below[0])
    return pld.PrivacyLossDistribution(grid_pmf(k_lo, probs, float(above[0]), step))
