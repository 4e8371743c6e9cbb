"""Bayesian privacy: maximum (MBP) and average (ABP) — bounds and estimates (privacy-math.md §6).

MBP: ``ξ = max_{w,d} |log(f_{D|W}(d|w) / f_D(d))|``; ABP: ``ε_pa = sqrt(JS(F^A ‖ F^B))`` with the
natural log, ``F^A`` the attacker's posterior and ``F^B`` the prior. ξ-LDP implies ξ-MBP, and
``ε_pa ≤ (1/√2)·sqrt((ξ+ε)(e^{ξ+ε} − 1))`` where ``ε`` bounds the prior mismatch.

Per-release MBP bounds are the LDP parameters over the secret set, i.e. over its *diameter*:
VMF ``κ·d₂``-privacy on the unit sphere (diameter 2) gives ``2κ``; Laplace noise ``Lap(b)^p`` on
secrets in the ℓ1 ball of radius ``r`` (diameter ``2r``) gives ``2r/b``; the Gaussian has no
finite pure bound. (privacy-math.md §6 writes ``r/b`` for the Laplace; two secrets ``±r`` of
the ball already give a posterior/prior log-ratio above ``r/b`` — see the tests — so ``2r/b``
is the bound implemented.) Releases about the same secret compose additively in LDP, hence the
cumulative bound is the sum.

References
----------
.. [1] X. Zhang, T. Chen, "Bridging privacy and robustness for trustworthy machine learning"
   (MBP and ABP; ξ-LDP ⇒ ξ-MBP; the ABP bound).
.. [2] B. Weggenmann, F. Kerschbaum, "Differential privacy for directional data", CCS 2021
   (VMF satisfies κ·d₂-privacy).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from scipy import special

from fedpriv.errors import InputError
from fedpriv.validate import check_dim, check_nonnegative, check_positive

__all__ = [
    "abp_bound",
    "abp_estimate",
    "cumulative_mbp_bound",
    "laplace_mbp_bound",
    "mbp_estimate",
    "posterior_from_matches",
    "vmf_mbp_bound",
]


_EXP_MAX = math.log(sys.float_info.max)


def laplace_mbp_bound(radius: float, scale: float) -> float:
    """ξ of one Laplace release ``2r/b`` (LDP on the ℓ1 ball of radius ``r``, diameter 2r)."""
    return 2.0 * check_nonnegative("radius", radius) / check_positive("scale", scale)


def vmf_mbp_bound(kappa: float) -> float:
    """ξ of one VMF release: ``2κ`` (κ·d₂-privacy on the unit sphere, diameter 2)."""
    return 2.0 * check_positive("kappa", kappa)


def cumulative_mbp_bound(per_release: Iterable[float]) -> float:
    """ξ over releases about the same secret: the sum (LDP composition); ``inf`` stays ``inf``."""
    values = [float(v) for v in per_release]
    if any(math.isnan(v) or v < 0 for v in values):
        raise InputError("xi", values, "per-release MBP bounds >= 0")
    return math.inf if any(math.isinf(v) for v in values) else math.fsum(values)


def abp_bound(xi: float, prior_mismatch: float = 0.0) -> float:
    """``ε_pa ≤ (1/√2)·sqrt((ξ+ε)(e^{ξ+ε} − 1))`` ([1]_), ``ε`` = ``prior_mismatch``.

    ``inf`` for ``ξ = inf``. (Any ABP value is at most ``sqrt(log 2)`` ≈ 0.833, the largest
    square-rooted Jensen–Shannon divergence; the bound is returned as the formula gives it.)
    """
    total = float(xi) + check_nonnegative("prior_mismatch", prior_mismatch)
    if math.isnan(total) or total < 0:
        raise InputError("xi", xi, "an MBP parameter >= 0 (inf allowed)")
    if total > _EXP_MAX:  # e^{ξ+ε} overflows a double: the bound is vacuous
        return math.inf
    return math.sqrt(total * math.expm1(total) / 2.0)


def posterior_from_matches(
    counts: Mapping[int, int] | Sequence[int] | np.ndarray, pool_size: int, smoothing: float = 1.0
) -> np.ndarray:
    """``F^A(d) = (n_d + a) / (Σ n + a|𝒟|)``: the attacker's posterior over the candidate pool.

    Parameters
    ----------
    counts
        ``n_d``, the number of reconstructions matched to candidate ``d``: a sequence of length
        ``pool_size``, or a mapping from candidate index (``0 ≤ d < pool_size``) to count.
    pool_size
        ``|𝒟| ≥ 1``, the number of candidates (uniform prior over them).
    smoothing
        Additive smoothing ``a ≥ 0`` (default 1). With ``a = 0`` at least one match is needed.
    """
    pool_size = check_dim("pool_size", pool_size)
    a = check_nonnegative("smoothing", smoothing)
    n = np.zeros(int(pool_size))
    if isinstance(counts, Mapping):
        if any(not 0 <= int(d) < pool_size for d in counts):
            raise InputError("counts", dict(counts), f"candidate indices in [0, {pool_size})")
        for d, c in counts.items():
            n[int(d)] = c
    else:
        n = np.asarray(counts, dtype=float)
        if n.shape != (pool_size,):
            raise InputError("counts", counts, f"{pool_size} counts, one per candidate")
    if np.any(~np.isfinite(n)) or np.any(n < 0):
        raise InputError("counts", counts, "finite match counts >= 0")
    total = n.sum() + a * pool_size
    if total <= 0:
        raise InputError("counts", counts, "at least one match when smoothing = 0")
    return (n + a) / total


def _as_posterior(posterior: npt.ArrayLike) -> np.ndarray:
    f = np.asarray(posterior, dtype=float)
    if f.ndim != 1 or f.size == 0 or np.any(~(f >= 0)) or not math.isclose(f.sum(), 1.0):
        raise InputError("F_A", posterior, "a probability vector (non-negative, summing to 1)")
    return f


def mbp_estimate(F_A: npt.ArrayLike, pool_size: int) -> float:  # noqa: N803 - the paper's name
    """``ξ̂ = max_d |log(F^A(d)·|𝒟|)|`` over the candidates with ``F^A(d) > 0``.

    The prior is uniform, ``1/|𝒟|``. Candidates given zero posterior mass (possible only with
    smoothing 0) are left out: their ratio is ``−inf``; use smoothing > 0 to count them.
    """
    f = _as_posterior(F_A)
    if f.size != pool_size:
        raise InputError("pool_size", pool_size, f"the length of F_A ({f.size})")
    support = f[f > 0]
    return float(np.max(np.abs(np.log(support * pool_size))))


def abp_estimate(F_A: npt.ArrayLike) -> float:  # noqa: N803 - the paper's name
    """``ε̂_pa = sqrt(JS(F^A ‖ uniform))``, Jensen–Shannon divergence with the natural log.

    ``JS(P‖U) = ½ KL(P‖M) + ½ KL(U‖M)``, ``M = (P + U)/2``, with ``0·log 0 = 0``
    (``scipy.special.rel_entr``).
    """
    f = _as_posterior(F_A)
    uniform = np.full(f.size, 1.0 / f.size)
    mid = 0.5 * (f + uniform)
    js = 0.5 * np.sum(special.rel_entr(f, mid)) + 0.5 * np.sum(special.rel_entr(uniform, mid))
    return math.sqrt(max(float(js), 0.0))
