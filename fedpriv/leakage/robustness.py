"""PAC robustness and input robustness from Bayesian privacy (Zhang & Chen, Theorems 4.3, 5.5).

**Sources.** The paper's definitions (Def. 4.3 ε-MBP, Def. 4.4 standard accuracy, Def. 4.6
α-PAC robustness) could not be retrieved here (arXiv 2403.16591, v5); the statements below are
implemented literally as issue #18 gives them:

* Theorem 4.3: an (ε, β, α)-MBP mechanism — ε-MBP (privacy-math.md §6) with standard accuracy
  α at confidence 1 − β — is α-PAC-robust with probability ``1 − γ``, ``γ = (1 + 4ε)β``.
  When ``γ ≥ 1`` the statement says nothing (*vacuous*); with ``ε = ∞`` (the Gaussian has no
  finite MBP bound) the hypothesis fails and the result is vacuous too.
* Standard accuracy of ONE release, as read here: ``P(‖M(v) − v‖ ≤ α) ≥ 1 − β`` for the
  released ``M(v)`` and the value ``v`` it perturbs, so α is the (1 − β)-quantile of the size
  of the noise. The norm: the one the mechanism's sensitivity is measured in
  (privacy-math.md §2, the same as the server-side checks of §9) — ℓ2 for Gaussian and VMF,
  **ℓ1 for Laplace** (ℓ1 clipping), where ``‖b·V‖₁ ~ b·Gamma(p, 1)`` exactly; since
  ``‖·‖₂ ≤ ‖·‖₁`` the Laplace α is also a valid (conservative) ℓ2 radius.

  The quantiles are the pure functions here; which one a mechanism's release follows is the
  mechanism's own method, :meth:`fedpriv.mechanisms.base.Mechanism.pac_accuracy` (one file per
  mechanism: a new mechanism states its own α, or none):

  - Gaussian, release ``(S + N(0, s²I_p))/L`` with ``s = σC``: ``α = s·χ_p⁻¹(1 − β)/L``
    (:func:`gaussian_accuracy`).
  - Laplace, release ``(S + Lap(b)^p)/L``: ``α = b·Γ_p⁻¹(1 − β)/L`` (ℓ1,
    :func:`laplace_accuracy`).
  - VMF, release ``s·y`` against ``s·u``: ``‖s·y − s·u‖ = 2s·sin(θ/2)``, ``θ = arccos uᵀy``,
    so ``α = 2s·sin(θ_{1−β}/2)`` with ``θ_{1−β}`` the (1 − β)-quantile of the angle
    (:func:`vmf_accuracy`); the batch size does not enter.
  - clip: 0 (the release *is* the clipped aggregate; clipping bias is not noise);
    none: undefined (None) — no mechanism, so no (ε, β, α)-MBP statement to make.
* Theorem 5.5 (input robustness): ``α = C·r/2 + (4D(1 − ε_p) − c₂·c_b·I^{p−1}) / (2c_a)``
  with Lipschitz constant ``C``, radius ``r``, parameter-space bound ``D``, algorithm
  constants ``c_a, c_b, c₂, I, p`` and privacy leakage ``ε_p``. Every constant is an
  assumption about the problem and the algorithm that fedpriv cannot check; ``ε_p`` must be
  the paper's leakage measure, accepted in [0, 1] (the ABP of §6 is at most √(log 2)).
  ``fedpriv robustness`` reports it with the list of these assumptions
  (:mod:`fedpriv.commands.robustness`).

References
----------
.. [1] X. Zhang, W. Chen, "Bridging privacy and robustness for trustworthy machine learning",
   arXiv 2403.16591 (v5, 2025), Theorems 4.3 and 5.5, Definitions 4.3, 4.4, 4.6.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from scipy import stats

from fedpriv.leakage.vmf_curve import vmf_angle_quantile
from fedpriv.validate import (
    check_dim,
    check_finite,
    check_nonnegative,
    check_positive,
    check_probability,
)

__all__ = [
    "InputRobustness",
    "PacConfidence",
    "gaussian_accuracy",
    "input_robustness",
    "laplace_accuracy",
    "pac_robust_confidence",
    "vmf_accuracy",
]

@dataclass(frozen=True)
class PacConfidence:
    """Theorem 4.3: ``gamma = (1 + 4ε)β``; ``confidence = 1 − gamma``, None when vacuous."""

    gamma: float
    confidence: float | None

    @property
    def vacuous(self) -> bool:
        """Whether the theorem says nothing (``γ ≥ 1`` or ``ε = ∞``)."""
        return self.confidence is None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields, ``vacuous`` included."""
        return {**asdict(self), "vacuous": self.vacuous}


def pac_robust_confidence(eps_mbp: float, beta: float) -> PacConfidence:
    """Probability ``1 − (1 + 4ε)β`` with which an (ε, β, α)-MBP mechanism is α-PAC-robust.

    Parameters
    ----------
    eps_mbp
        Maximum Bayesian privacy ``ε ≥ 0`` (``inf`` allowed: vacuous).
    beta
        Failure probability of the standard accuracy, in [0, 1].
    """
    eps = check_nonnegative("eps_mbp", eps_mbp, allow_inf=True)
    b = check_probability("beta", beta, closed=True)
    gamma = math.inf if math.isinf(eps) else (1.0 + 4.0 * eps) * b
    return PacConfidence(gamma=gamma, confidence=1.0 - gamma if gamma < 1.0 else None)


@lru_cache(maxsize=256)
def _chi2_isf(beta: float, dim: int) -> float:
    """``χ²_p`` upper quantile, kept: the clients of a round share ``(β, p)``."""
    return float(stats.chi2.isf(beta, dim))


@lru_cache(maxsize=256)
def _gamma_isf(beta: float, dim: int) -> float:
    """``Gamma(p, 1)`` upper quantile, kept like :func:`_chi2_isf`."""
    return float(stats.gamma.isf(beta, dim))


def gaussian_accuracy(beta: float, dim: int, noise_std: float, batch_size: float) -> float:
    """α of one Gaussian release ``(S + N(0, s²I_p))/L``: ``s·χ_p⁻¹(1 − β)/L`` (ℓ2).

    Parameters
    ----------
    beta
        Failure probability in (0, 1).
    dim
        Model dimension ``p``.
    noise_std
        Noise std on the sum, ``s = σC`` (0: no noise, α = 0).
    batch_size
        ``L``, the divisor of the noisy sum.
    """
    b, p = check_probability("beta", beta), check_dim("dim", dim)
    std = check_nonnegative("noise_std", noise_std)
    radius = math.sqrt(_chi2_isf(b, p))  # isf: precise for small β
    return std * radius / check_positive("batch_size", batch_size)


def laplace_accuracy(beta: float, dim: int, scale: float, batch_size: float) -> float:
    """α of one Laplace release ``(S + Lap(b)^p)/L``: ``b·Γ_p⁻¹(1 − β)/L`` (ℓ1, exact, since
    ``‖Lap(b)^p‖₁ ~ b·Gamma(p, 1)``; also a valid ℓ2 radius).

    Parameters
    ----------
    beta, dim, batch_size
        As in :func:`gaussian_accuracy`.
    scale
        Laplace scale on the sum, ``b = λC``.
    """
    b, p = check_probability("beta", beta), check_dim("dim", dim)
    noise = check_positive("laplace_scale", scale) * _gamma_isf(b, p)
    return noise / check_positive("batch_size", batch_size)


@lru_cache(maxsize=256)
def vmf_accuracy(beta: float, dim: int, kappa: float, scale: float) -> float:
    """α of one VMF release ``s·y`` against ``s·u``: ``2s·sin(θ_{1−β}/2)``, ``θ_{1−β}`` the
    (1 − β)-quantile of the angle between ``y`` and ``u``
    (:func:`fedpriv.leakage.vmf_curve.vmf_angle_quantile`); the batch size does not enter.

    Parameters
    ----------
    beta
        Failure probability in (0, 1).
    dim
        Model dimension ``p ≥ 2``.
    kappa
        Concentration ``κ > 0``.
    scale
        The public release scale ``s``.

    Kept per argument tuple: the angle quantile takes about 26 ms at p = 13,700 and every
    client with the same declaration shares it (the auditor asks once per reply).
    """
    b, p = check_probability("beta", beta), check_dim("dim", dim, minimum=2)
    theta = vmf_angle_quantile(1.0 - b, check_positive("kappa", kappa), p)
    return 2.0 * check_positive("vmf_scale", scale) * math.sin(theta / 2.0)


@dataclass(frozen=True)
class InputRobustness:
    """Theorem 5.5: ``alpha = lipschitz_term + leakage_term − algorithm_term``."""

    alpha: float
    lipschitz_term: float
    leakage_term: float
    algorithm_term: float

    def as_dict(self) -> dict[str, float]:
        """JSON-ready fields."""
        return asdict(self)


def input_robustness(
    *,
    lipschitz: float,
    radius: float,
    diameter: float,
    leakage: float,
    c_a: float,
    c_b: float,
    c_2: float,
    i_const: float,
    p_const: float,
) -> InputRobustness:
    """``α = C·r/2 + (4D(1 − ε_p) − c₂·c_b·I^{p−1}) / (2c_a)`` ([1]_ Theorem 5.5).

    Parameters
    ----------
    lipschitz, radius, diameter
        ``C > 0``, ``r ≥ 0``, ``D > 0`` (assumptions about the problem).
    leakage
        Privacy leakage ``ε_p`` in [0, 1].
    c_a, c_b, c_2, i_const, p_const
        Algorithm constants: ``c_a > 0``, ``c_b ≥ 0``, ``c₂ ≥ 0``, ``I > 0``, finite ``p``;
        ``I^{p−1}`` is taken in log space (``inf`` if it overflows a double).
    """
    lip = check_positive("lipschitz", lipschitz) * check_nonnegative("radius", radius) / 2.0
    two_ca = 2.0 * check_positive("c_a", c_a)
    eps = check_probability("leakage", leakage, closed=True)
    leak = 4.0 * check_positive("diameter", diameter) * (1.0 - eps) / two_ca
    coeff = check_nonnegative("c_b", c_b) * check_nonnegative("c_2", c_2)
    power = check_finite("p_const", p_const) - 1.0
    log_term = power * math.log(check_positive("i_const", i_const))
    if coeff == 0.0:
        algo = 0.0
    else:
        log_algo = math.log(coeff) + log_term - math.log(two_ca)
        algo = math.inf if log_algo > 709.0 else math.exp(log_algo)
    return InputRobustness(lip + leak - algo, lip, leak, algo)
