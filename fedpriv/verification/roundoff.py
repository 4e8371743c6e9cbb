"""Floating-point tolerances of the server-side checks (privacy-math.md §9.6).

The client computes in float32 and the server sees ``θ_client`` and ``θ``, both float32. Two
things separate what the server recovers from the exact quantities of §2:

* **Norms inside the mechanism.** A float32 clipped gradient can exceed ``C`` and a float32
  unit vector can miss norm 1 by a relative :func:`norm_tolerance` ``ρ``.
* **The parameter round trip.** Each step computes ``θ_{t+1} = fl(θ_t − fl(η·r_t))`` and the
  server ``Δ = fl(θ_k − θ_0)``; :func:`roundoff_bound` bounds ``‖Δ + η Σ_t r_t‖``.

Both are worst-case analyses in the standard model ``fl(a ∘ b) = (a ∘ b)(1 + δ)``,
``|δ| ≤ u`` (``u = 2⁻²⁴`` for float32), written by hand because no library bounds these
particular computations.

References
----------
.. [1] N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM 2002,
   §2.2 (the model), Lemma 3.1 and §3.1 (``γ_n = nu/(1−nu)``; inner products and sums of n
   terms in any order have relative error at most ``γ_n``), Lemma 3.3 (``γ_a + γ_b + γ_aγ_b
   ≤ γ_{a+b}``).
"""

from __future__ import annotations

import math
from functools import lru_cache

from scipy import stats

__all__ = [
    "FLOAT32_UNIT_ROUNDOFF",
    "ROUNDOFF_RISK",
    "chi_roundoff_quantile",
    "gamma_bound",
    "gamma_roundoff_quantile",
    "norm_tolerance",
    "roundoff_bound",
]

FLOAT32_UNIT_ROUNDOFF = 2.0**-24

# Rounding slacks for noisy mechanisms need a bound on each step's noise norm; it is taken at
# this upper tail probability per step, so a slack fails with probability ≤ k·1e-15 — and even
# then only matters if the slack is comparable to the test's margin, which it never is.
ROUNDOFF_RISK = 1e-15


@lru_cache(maxsize=64)
def chi_roundoff_quantile(p: int) -> float:
    """``χ_p`` at its ``1 − ROUNDOFF_RISK`` quantile: a bound on one Gaussian step's noise norm
    in units of its std (kept per ``p``: scipy's ``isf`` costs more than the rest of a reply's
    check, and the verification and the observation both ask)."""
    return math.sqrt(float(stats.chi2.isf(ROUNDOFF_RISK, p)))


@lru_cache(maxsize=64)
def gamma_roundoff_quantile(p: int) -> float:
    """``Gamma(p, 1)`` at its ``1 − ROUNDOFF_RISK`` quantile: a bound on one Laplace step's
    noise ℓ1 norm in units of its scale (kept per ``p``)."""
    return float(stats.gamma.isf(ROUNDOFF_RISK, p))

# The release arithmetic (noise scaling, sum, division by L; or s·y), fl(η), the product η·r and,
# for weight decay or Nesterov, one more addition: at most 8 roundings relative to the step.
_STEP_ROUNDINGS = 8


def gamma_bound(count: int, unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF) -> float:
    """Higham's ``γ_n = n·u / (1 − n·u)`` (``inf`` when ``n·u ≥ 1``): the relative error of a
    sum or inner product of ``n`` terms, in any summation order."""
    nu = count * unit_roundoff
    return math.inf if nu >= 1.0 else nu / (1.0 - nu)


def norm_tolerance(dim: int, terms: int = 0, unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF) -> float:
    """Relative tolerance ``ρ = 2γ_p + γ_B + 16u`` on float32 norms inside a mechanism.

    Covers (i) a clipped gradient ``ḡ = g·fl(C/fl(‖g‖))``: ``‖ḡ‖ ≤ C(1 + γ_p/2 + 3u)`` to first
    order, and a float32 sum of ``B = terms`` of them, ``(1 + γ_B)`` more; (ii) the VMF sampler's
    float32 unit vector ``y = w·m + sqrt(1−w²)·v`` with ``m``, ``v`` normalised and ``v``
    orthogonalised in float32: ``|‖y‖ − 1| ≤ γ_p + 10u`` to first order (``γ_p/2 + 3u`` for each
    normalisation, ``γ_p`` for the residual ``⟨m, v⟩``, ``4u`` for ``w² + (1−w²)``, ``3u`` for the
    final combination). The factor 2 on ``γ_p`` and ``16u`` cover the second-order terms for
    ``p·u ≤ 0.01`` (p up to 1.6·10⁵ in float32). Worst case in any summation order; measured
    deviations at p = 13,700 are ~10⁻⁷ against ``ρ ≈ 1.6·10⁻³``.
    """
    return 2.0 * gamma_bound(dim, unit_roundoff) + gamma_bound(terms, unit_roundoff) + (
        16.0 * unit_roundoff
    )


def roundoff_bound(
    start_norm: float,
    step_norm: float,
    steps: int,
    delta_norm: float,
    unit_roundoff: float = FLOAT32_UNIT_ROUNDOFF,
) -> float:
    """Bound on ``‖Δ_server − (−η Σ_t r_t)‖`` from float rounding, in any monotone norm.

    Per step and coordinate ``θ_{t+1} = fl(θ_t − fl(fl(η)·r_t))`` errs from ``θ_t − η r_t`` by at
    most ``8u·|η r_t| + ε|θ_{t+1}|`` (``ε = u/(1−u)``; the 8 roundings of ``_STEP_ROUNDINGS``
    are taken relative to ``step_norm``, which must bound the step *before* cancellation, e.g.
    ``η(‖S_t‖ + ‖N_t‖)/L``). With ``‖θ_{t+1}‖ ≤ ‖θ_0‖ + k·step_norm + E`` and ``E`` the summed
    error, ``E ≤ k(8u·step_norm + ε(‖θ_0‖ + k·step_norm)) / (1 − kε)``; the server's
    subtraction adds ``ε‖Δ‖`` (0 if done in float64). Norms taken coordinatewise carry over to
    ℓ1 and ℓ2 alike.

    Parameters
    ----------
    start_norm
        ``‖θ_0‖``, the broadcast parameters.
    step_norm
        A bound on every step's ``‖η·r_t‖`` (before cancellation, see above).
    steps
        Local steps ``k``.
    delta_norm
        ``‖Δ‖`` as the server computed it.
    unit_roundoff
        ``u`` of the client's arithmetic.
    """
    eps = unit_roundoff / (1.0 - unit_roundoff)
    if steps * eps >= 0.5:
        return math.inf
    reach = start_norm + steps * step_norm
    drift = steps * (_STEP_ROUNDINGS * unit_roundoff * step_norm + eps * reach)
    return drift / (1.0 - steps * eps) + eps * delta_norm
