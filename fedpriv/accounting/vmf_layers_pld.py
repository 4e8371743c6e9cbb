"""The subsampled multi-variate (per-layer) VMF under PLD: the product of the blocks' releases.

privacy-math.md §15. A client's per-layer VMF releases its ``R`` blocks together on one sampled
batch, so Poisson sampling samples the *product* mechanism once: the subsampled product is not
the composition of subsampled blocks. Under the dominating pair (antipodal directions in every
block) the joint privacy loss is ``L = Σ_r L_r``, ``L_r = 2κ_r cos θ_r``, whose law under ``P``
(resp. ``Q``) is the convolution of the blocks' laws under ``P_r`` (resp. ``Q_r``). Sampling at
rate ``q`` turns the pair into ``U = qP + (1−q)Q`` against ``Q``: the remove loss is
``log(1 − q + q e^L)`` under ``U`` (``L`` distributed as ``q·law_P + (1−q)·law_Q``), the add
loss ``−log(1 − q + q e^L)`` under ``Q``; both are monotone in ``L``.

Certified pessimistically, in three steps, each of which replaces a pair by one that dominates
it:

1. each block's loss is placed in the cells ``[kh, (k+1)h)`` with its exact masses under
   ``P_r`` and ``Q_r`` (:func:`fedpriv.accounting.vmf_pld.loss_cell_masses`); the joint cell
   masses are the blocks' convolved (FFT; the round-off, bounded by ``n·ε_mach·max``, and any
   negative mass it leaves, go to the infinite-loss mass);
2. the remove direction takes every block's loss at its cell's upper end
   (``L = (Σk_r + R)·h``), the add direction at its lower end (``L = Σk_r·h``), so that each
   direction's own loss is rounded up;
3. the resulting losses are placed on dp-accounting's grid ``kΔ`` by connect-the-dots
   (Doroshenko et al., Algorithm 1), which dominates any discrete pair it is applied to.

The cell width ``h`` is 1e-4 nats (the joint loss of one release is then at most ``R·h``
above the truth), coarser only where the blocks' loss ranges would exceed
:data:`CELL_BUDGET` cells together. At ``q = 1`` the release is the unsampled product, whose PLD
is the blocks' PLDs composed (:meth:`VMFLayersRelease.pld` takes that exact route there).

References
----------
.. [1] Biswas et al., arXiv:2502.04045, Prop. 2 (independent blocks) and the antipodal pair.
.. [2] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect the dots: tighter
   discrete approximations of privacy loss distributions", PETS 2022, Algorithm 1.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import signal

from fedpriv.accounting.pld_grid import GridNeed, LossLaw, grid_pmf, resolve_discretization
from fedpriv.accounting.vmf_pld import DEFAULT_DISCRETIZATION, loss_cell_masses
from fedpriv.errors import InputError
from fedpriv.validate import check_dim, check_rate

__all__ = ["CELL_BUDGET", "CELL_WIDTH", "vmf_layers_grid_need", "vmf_layers_pld"]

CELL_WIDTH = 1e-4
"""Default width ``h`` (nats) of a block's loss cells."""
CELL_BUDGET = 8_000_000
"""Most loss cells of all blocks together (``Σ 4κ_r / h``): ``h`` grows beyond it."""
_SIZING_CELLS = 16_384


def _cell_width(blocks: tuple[tuple[float, int], ...]) -> float:
    return max(CELL_WIDTH, sum(4.0 * kappa for kappa, _ in blocks) / CELL_BUDGET)


def _convolved(parts: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """The convolution of ``parts`` and the mass its round-off may have moved (module
    docstring, step 1)."""
    total = parts[0]
    for part in parts[1:]:
        total = signal.fftconvolve(total, part)
    slack = float(total.size * np.finfo(float).eps * max(float(np.max(total)), 0.0))
    negative = float(-np.sum(total[total < 0.0]))
    return np.clip(total, 0.0, None), 2.0 * negative + slack


@lru_cache(maxsize=8)
def _directions(
    blocks: tuple[tuple[float, int], ...], q: float
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], float]:
    """``((remove losses, U-masses), (add losses, Q-masses), infinite mass)``."""
    h = _cell_width(blocks)
    cells = [loss_cell_masses(kappa, dim, h) for kappa, dim in blocks]
    start = sum(k for k, _, _ in cells)
    mass_p, slack_p = _convolved([p for _, p, _ in cells])
    mass_q, slack_q = _convolved([m for _, _, m in cells])
    joint = (start + np.arange(mass_p.size)) * h
    with np.errstate(divide="ignore"):
        keep = math.log1p(-q) if q < 1.0 else -math.inf
        remove = np.logaddexp(keep, math.log(q) + joint + len(blocks) * h)
        add = -np.logaddexp(keep, math.log(q) + joint)
    return ((remove, q * mass_p + (1.0 - q) * mass_q), (add, mass_q),
            q * slack_p + (1.0 - q) * slack_q + slack_q)


def _checked(blocks: Any, sample_rate: Any, steps: Any) -> tuple[tuple, float, int]:
    try:
        blocks = tuple((float(k), int(p)) for k, p in blocks)
    except (TypeError, ValueError):
        raise InputError("blocks", blocks, "(kappa, dim) pairs") from None
    if not blocks:
        raise InputError("blocks", blocks, "at least one (kappa, dim) block")
    return blocks, check_rate("sample_rate", sample_rate), check_dim("steps", steps)


def vmf_layers_grid_need(blocks: Any, sample_rate: float, steps: int = 1) -> GridNeed:
    """Sizes of the ``steps``-fold composed subsampled product PLD: both directions' laws
    binned on 16,384 cells (for choosing Δ; the laws are computed once per ``(blocks, q)``).

    Raises
    ------
    InputError
        Bad ``blocks`` (``(κ, p)`` pairs, as :func:`~fedpriv.accounting.vmf_pld.vmf_grid_need`
        takes them), ``sample_rate`` outside (0, 1], ``steps`` not an integer ≥ 1.
    """
    blocks, q, steps = _checked(blocks, sample_rate, steps)
    remove, add, _ = _directions(blocks, q)
    laws = []
    for losses, probs in (remove, add):
        low, high = float(losses.min()), float(losses.max())
        edges = np.linspace(low, high, _SIZING_CELLS + 1)
        cell = np.clip(np.searchsorted(edges, losses, side="right") - 1, 0, _SIZING_CELLS - 1)
        binned = np.bincount(cell, probs, _SIZING_CELLS)
        laws.append(LossLaw(0.5 * (edges[:-1] + edges[1:]), binned, low, high))
    return GridNeed(tuple(laws), steps, "kappa", max(k for k, _ in blocks))


def _connect_dots(losses: np.ndarray, probs: np.ndarray, step: float) -> tuple[int, np.ndarray]:
    """``(k_lo, masses on kΔ)``: each loss ``jΔ + x`` puts ``w(x) = (1 − e^{−x})/(1 − e^{−Δ})``
    of its mass on ``(j+1)Δ`` and the rest on ``jΔ`` (Doroshenko et al., Algorithm 1)."""
    j = np.floor(losses / step)
    x = np.clip(losses - j * step, 0.0, step)
    up = probs * (-np.expm1(-x) / -math.expm1(-step))
    k_lo = int(j.min())
    index = (j - k_lo).astype(np.int64)
    size = int(index.max()) + 2
    return k_lo, np.bincount(index, probs - up, size) + np.bincount(index + 1, up, size)


def vmf_layers_pld(
    blocks: Any, sample_rate: float, discretization: float | None = None, *, steps: int = 1
) -> Any:
    """Pessimistic dp-accounting PLD of ONE Poisson-subsampled per-layer VMF release (module
    docstring): ``blocks`` are its ``(κ_r, p_r)``; ``discretization`` as
    :func:`~fedpriv.accounting.vmf_pld.vmf_pld` takes it (None: 1e-5 where it fits the point
    budget for ``steps`` compositions, else the finest that fits)."""
    need = vmf_layers_grid_need(blocks, sample_rate, steps)
    step = resolve_discretization(need, discretization, DEFAULT_DISCRETIZATION)
    from dp_accounting.pld import privacy_loss_distribution as pld

    blocks, q, _ = _checked(blocks, sample_rate, steps)
    remove, add, infinite = _directions(blocks, q)
    pmfs = [grid_pmf(*_connect_dots(losses, probs, step), infinite, step)
            for losses, probs in (remove, add)]
    return pld.PrivacyLossDistribution(*pmfs)
