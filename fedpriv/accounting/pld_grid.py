"""The value discretisation Δ of a PLD, chosen to fit a memory budget before anything is allocated.

dp-accounting holds a privacy loss distribution (PLD) as a dense array on the grid ``kΔ``. One
release spans ``W/Δ`` points, ``W`` the width (nats) of the loss support its grid keeps. Its
T-fold self-composition (FFT) spans ``W_T/Δ`` points, ``W_T`` the window dp-accounting keeps:
it cuts at most 1e-15 of the composed mass by a Chernoff bound at the orders ``±k/W`` per nat,
``k = 1 … 20`` (``dp_accounting.pld.common.compute_self_convolve_bounds``, whose rule
:func:`composed_width` repeats so that the check needs no import of dp-accounting, about a
second). ``W`` and ``W_T`` do not depend on Δ, so they are computed once from a coarse law of
the loss (:class:`LossLaw`, a few thousand cells), and the grid is
``Δ = max(default, s/FINE_RESOLUTION, W/POINT_BUDGET, ΣW_T/POINT_BUDGET)``: the mechanism's
default or a hundredth of one release's loss standard deviation ``s`` (below), whichever is
coarser, where it fits, else the finest grid that fits. The PLD built on it stays pessimistic
(an upper bound on δ(ε), hence on ε) at every Δ.

How coarse may Δ be? Pessimistic connect-the-dots (Doroshenko et al. 2022) moves a loss value
``ℓ = a + x ∈ [a, a + Δ]`` onto ``a`` and ``a + Δ`` keeping ``E_P[1]`` and ``E_P[e^{−L}]``, i.e.
with weight ``w = (1 − e^{−x})/(1 − e^{−Δ})`` on ``a + Δ``: the mean of the loss rises by
``wΔ − x ≈ x(Δ − x)/2 ≤ Δ²/8`` and its variance by ``w(1 − w)Δ² ≤ Δ²/4`` per release (derived
here from that split; to leading order in Δ). After T releases the composed loss (mean
``T·KL``, variance ``T·s²``, ``KL ≈ s²/2`` for small losses) is shifted by a relative
``Δ²/(4s²)``: with ``Δ ≤ s/RESOLUTION``, ``s`` the standard deviation of one release's loss (in
the direction, add or remove, where it is larger: that one dominates ε), the bias of ε is below
0.25 %; at ``s/FINE_RESOLUTION`` it is below 2.5·10⁻⁵ relative, which is why a grid finer than
that is not used: it costs time (the dense arrays grow as 1/Δ) and buys no digit a reader
sees. Measured against Δ = 1e-4: ε changed by at most 1.6·10⁻⁵ relative (Gaussian, Laplace,
VMF; always upward), the accounting 1.5–8× faster. A setting that needs a coarser Δ
than ``max(default, s/RESOLUTION)`` is refused with :class:`~fedpriv.errors.InputError` naming
``steps`` (the composition does not fit) or the noise parameter (one release does not).

References
----------
.. [1] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect the dots: tighter
   discrete approximations of privacy loss distributions", PETS 2022 (Algorithm 1).
.. [2] Google, dp-accounting, ``pld.common.compute_self_convolve_bounds`` (the Chernoff window;
   its source cites eq. (5) of the supplementary material of dp-accounting's PLD notes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from fedpriv.errors import InputError
from fedpriv.validate import check_positive

__all__ = [
    "POINT_BUDGET",
    "FINE_RESOLUTION",
    "RESOLUTION",
    "GridNeed",
    "LossLaw",
    "choose_discretization",
    "composed_width",
    "grid_pmf",
    "resolve_discretization",
    "subsampled_laws",
]

POINT_BUDGET = 3_000_000
"""Most points of one PLD array (single release or composed window). dp-accounting's FFT
self-composition holds about five complex arrays of that length: about 250 MB at the budget."""

RESOLUTION = 10.0
"""One release's loss standard deviation spans at least this many grid steps (bias < 0.25 %)."""
FINE_RESOLUTION = 100.0
"""...and at most this many where the budget allows (bias < 2.5·10⁻⁵ relative)."""

_MARGIN = 5e-2  # the estimate ran up to 0.3 % short of dp-accounting's count at Δ = 2e-3 and
# 3.2 % short at Δ = 0.022 (VMF κ = 500, T = 1,407: the coarser grid's rounding widens the law)
_TRUNCATION = 1e-15  # dp-accounting's default tail_mass_truncation of self_compose
_ORDERS = np.concatenate([np.arange(-20, 0), np.arange(1, 21)]).astype(float)


@dataclass(frozen=True)
class LossLaw:
    """Coarse law of one release's privacy loss under the upper distribution, one direction.

    Attributes
    ----------
    losses, probs
        Representative loss values (nats) and their probabilities (mass beyond the grid is
        left out, as dp-accounting keeps it as infinite-loss mass).
    low, high
        Ends of the loss grid a PLD of this release keeps.
    """

    losses: np.ndarray
    probs: np.ndarray
    low: float
    high: float

    @property
    def width(self) -> float:
        """Width ``W`` (nats) of one release's loss grid."""
        return self.high - self.low

    @cached_property
    def log_mgf(self) -> np.ndarray:
        """``log E[e^{λ_k (L − low)}]`` at dp-accounting's orders ``λ_k = k/W``, k = ±1 … ±20."""
        keep = self.probs > 0.0
        shifted = self.losses[keep] - self.low
        orders = _ORDERS / self.width
        from scipy import special  # here: importing the grid (vmf.py's constants) stays light

        return special.logsumexp(orders[:, None] * shifted + np.log(self.probs[keep]), axis=1)

    @property
    def std(self) -> float:
        """Standard deviation of the loss."""
        total = float(np.sum(self.probs))
        mean = float(np.dot(self.probs, self.losses)) / total
        return math.sqrt(max(float(np.dot(self.probs, (self.losses - mean) ** 2)) / total, 0.0))


def subsampled_laws(
    loss: np.ndarray, mass_p: np.ndarray, mass_q: np.ndarray, bounds: tuple[float, float],
    sample_rate: float,
) -> tuple[LossLaw, LossLaw]:
    """Remove and add laws of a Poisson-subsampled pair from the unsubsampled pair (P, Q).

    ``loss`` is the unsubsampled loss ``log(dP/dQ)`` at the cells of a statistic, ``mass_p``,
    ``mass_q`` the cells' probabilities, ``bounds`` the unsubsampled losses at the ends of the
    grid. With ``U = (1−q)Q + qP``: remove is U against Q, loss ``log(1 − q + q e^ℓ)`` under U;
    add is Q against U, loss ``−log(1 − q + q e^ℓ)`` under Q (as in ``vmf_pld.py``).
    """
    q = float(sample_rate)

    def sub(value: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.logaddexp(np.log1p(-q), math.log(q) + value)

    lo, hi = (float(v) for v in sub(np.asarray(bounds, dtype=float)))
    shifted = np.clip(sub(loss), lo, hi)
    remove = LossLaw(shifted, (1.0 - q) * mass_q + q * mass_p, lo, hi)
    return remove, LossLaw(-shifted, mass_q, -hi, -lo)


def composed_width(law: LossLaw, steps: int) -> float:
    """Width (nats) of the window dp-accounting keeps when it self-composes ``law`` T times.

    The rule of ``compute_self_convolve_bounds``: with losses measured from the grid's low end,
    ``upper = min_k (T log E[e^{λ_k L}] + log(2/τ)) / λ_k`` over ``λ_k = k/W > 0`` (at most
    ``T·W``), ``lower`` the same over ``λ_k < 0`` (at least 0), ``τ = 1e-15``.
    """
    width = law.width
    if not width > 0.0:  # one grid point: its compositions are one point
        return 0.0
    orders = _ORDERS / width
    bounds = (steps * law.log_mgf + math.log(2.0 / _TRUNCATION)) / orders
    bounds = np.where(np.isfinite(bounds), bounds, np.nan)
    upper = min(steps * width, float(np.nanmin(bounds[orders > 0], initial=steps * width)))
    lower = max(0.0, float(np.nanmax(bounds[orders < 0], initial=0.0)))
    return max(upper - lower, 0.0)


@dataclass(frozen=True)
class GridNeed:
    """What the T-fold composition of one release asks of a common value discretisation.

    Attributes
    ----------
    laws
        The release's :class:`LossLaw` per direction (remove, add).
    steps
        Number of compositions T.
    parameter, value
        The noise parameter that governs the release (named in errors) and its value.
    """

    laws: tuple[LossLaw, ...]
    steps: int
    parameter: str
    value: float

    @property
    def single_width(self) -> float:
        """Widest single-release grid (nats) over the directions."""
        return max(law.width for law in self.laws)

    @cached_property
    def composed_width(self) -> float:
        """Widest composed window (nats) over the directions."""
        return max(composed_width(law, self.steps) for law in self.laws)

    @property
    def loss_std(self) -> float:
        """Standard deviation of one release's loss in the direction where it is largest (the
        direction whose composition dominates ε)."""
        return max(law.std for law in self.laws)


def choose_discretization(
    needs: Sequence[GridNeed], default: float, budget: int | None = None
) -> float:
    """The value discretisation Δ for a ledger of self-composed PLDs (module docstring).

    ``Δ = max(default, s/FINE_RESOLUTION, W/budget, ΣW_T/budget)`` (the parts of a ledger
    compose into a window as wide as the sum of theirs); it must not exceed
    ``max(default, s/RESOLUTION)``, where ``s² = Σ T_i s_i² / Σ T_i`` (the composed loss has
    variance ``Σ T_i s_i²``, to which the grid adds at most ``Σ T_i Δ²/4``), else
    :class:`~fedpriv.errors.InputError`.

    Parameters
    ----------
    needs
        One :class:`GridNeed` per distinct release of the ledger.
    default
        The mechanism's default Δ (the finest grid used).
    budget
        Most points of one array (default :data:`POINT_BUDGET`).
    """
    budget = POINT_BUDGET if budget is None else budget
    single = max(need.single_width for need in needs)
    composed = sum(need.composed_width for need in needs)
    usable = budget * (1.0 - _MARGIN)
    variance = sum(need.steps * need.loss_std**2 for need in needs)
    spread = math.sqrt(variance / sum(need.steps for need in needs))
    step = max(default, spread / FINE_RESOLUTION, single / usable, composed / usable)
    coarsest = max(default, spread / RESOLUTION)
    if step <= coarsest * (1.0 + 1e-12):
        return step
    widest = max(needs, key=lambda need: need.single_width)
    if single / usable > coarsest:
        raise InputError(widest.parameter, widest.value, (
            f"a value whose single-release PLD fits {budget:,} points at discretisation "
            f"{coarsest:.3g} (it would need {math.ceil(single / coarsest):,}): the loss "
            "of one release is too wide for the PLD accountant; use the RDP accountant"))
    longest = max(needs, key=lambda need: need.composed_width)
    fewer = "fewer releases"
    if len(needs) == 1:
        fewer = f"at most {_most_steps(longest, usable * coarsest):,} releases"
    raise InputError("steps", longest.steps, (
        f"{fewer} for the PLD accountant at {longest.parameter} = {longest.value:g}: "
        f"the composed PLD would need {math.ceil(composed / coarsest):,} points at the "
        f"coarsest accurate discretisation {coarsest:.3g} (limit {budget:,}); "
        "use the RDP accountant"))


def _most_steps(need: GridNeed, width_limit: float) -> int:
    """The largest T whose composed window is at most ``width_limit`` nats (bisection)."""
    def fits(steps: int) -> bool:
        return max(composed_width(law, steps) for law in need.laws) <= width_limit

    low, high = 1, need.steps  # fits(low) is known (the single release fits), fits(high) not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def resolve_discretization(
    need: GridNeed, discretization: float | None, default: float, budget: int | None = None
) -> float:
    """The Δ a PLD factory builds on: automatic for ``None``, else ``discretization`` if it fits.

    Raises :class:`~fedpriv.errors.InputError` when no accurate Δ fits (see
    :func:`choose_discretization`), or when an explicit ``discretization`` is too fine for the
    budget (naming the finest that fits).
    """
    budget = POINT_BUDGET if budget is None else budget
    auto = choose_discretization([need], default, budget)
    if discretization is None:
        return auto
    step = check_positive("discretization", discretization)
    widest = max(need.single_width, need.composed_width)
    if widest / step > budget * (1.0 - _MARGIN):
        raise InputError("discretization", discretization, (
            f"at least {widest / (budget * (1.0 - _MARGIN)):.3g} for {need.steps:,} release(s) at "
            f"{need.parameter} = {need.value:g} (limit {budget:,} points), or None to choose "
            "it automatically"))
    return step


_SPARSE_SIZE = 1_000  # dp-accounting's create_pmf returns a sparse PMF up to this size


def grid_pmf(k_lo: int, probs: np.ndarray, infinite: float, step: float) -> Any:
    """A pessimistic dp-accounting ``PLDPmf`` with ``probs`` on the losses ``(k_lo + i)·Δ`` and
    ``infinite`` mass at infinity: sparse up to 1,000 points and dense beyond, as dp-accounting's
    ``create_pmf`` makes them (PMFs compose by type)."""
    from dp_accounting.pld import pld_pmf

    if probs.size <= _SPARSE_SIZE:
        return pld_pmf.create_pmf(dict(enumerate(probs, k_lo)), step, infinite, True)
    return pld_pmf.DensePLDPmf(step, k_lo, probs, infinite, True)
