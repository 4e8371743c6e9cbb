"""Leakage measures beyond (ε, δ): Bayes capacity, trade-off functions, Bayes error and Δ,
Bayesian privacy bounds and estimates (privacy-math.md §4–6).

Modules: :mod:`~fedpriv.leakage.capacity` (§5), :mod:`~fedpriv.leakage.tradeoff` and
:mod:`~fedpriv.leakage.vmf_curve` (§4 trade-off functions), :mod:`~fedpriv.leakage.profiles`
(PLD privacy profiles of subsampled, composed mechanisms), :mod:`~fedpriv.leakage.bayes_error`
(R_min, Δ, the PP/BNP extremes), :mod:`~fedpriv.leakage.loss_pmf` (a PLD's loss pmfs and
profile), :mod:`~fedpriv.leakage.blackwell` (privacy-loss moments, emergent Blackwell
dominance), :mod:`~fedpriv.leakage.bayesian` (§6), :mod:`~fedpriv.leakage.robustness` (PAC and
input robustness from Bayesian privacy),
The front ends of ``fedpriv capacity``, ``compare`` and ``robustness`` are in
:mod:`fedpriv.commands`. Importing this package loads neither dp-accounting nor matplotlib.
"""

from fedpriv.leakage.bayes_error import (
    TradeoffCurve,
    bayes_error,
    blatant_non_privacy,
    delta_divergence,
    perfect_privacy,
    symmetric_delta,
)
from fedpriv.leakage.bayesian import (
    abp_bound,
    abp_estimate,
    cumulative_mbp_bound,
    laplace_mbp_bound,
    mbp_estimate,
    posterior_from_matches,
    vmf_mbp_bound,
)
from fedpriv.leakage.blackwell import (
    DominanceBound,
    LossFunctionals,
    composed_curve,
    pld_functionals,
    theorem3_bound,
    tradeoff_functionals,
)
from fedpriv.leakage.capacity import (
    THREAT_MODELS,
    compose_log_capacities,
    log_capacity_gaussian,
    log_capacity_laplace,
    log_capacity_vmf,
    secret_radius,
)
from fedpriv.leakage.robustness import (
    gaussian_accuracy,
    input_robustness,
    laplace_accuracy,
    pac_robust_confidence,
    vmf_accuracy,
)
from fedpriv.leakage.tradeoff import (
    blatant_non_privacy_tradeoff,
    gaussian_tradeoff,
    laplace_tradeoff,
    perfect_privacy_tradeoff,
    tradeoff_from_privacy_profile,
    vmf_tradeoff,
)
from fedpriv.leakage.vmf_curve import vmf_angle_quantile

__all__ = [
    "DominanceBound",
    "LossFunctionals",
    "THREAT_MODELS",
    "TradeoffCurve",
    "abp_bound",
    "abp_estimate",
    "bayes_error",
    "blatant_non_privacy",
    "blatant_non_privacy_tradeoff",
    "compose_log_capacities",
    "composed_curve",
    "cumulative_mbp_bound",
    "delta_divergence",
    "gaussian_accuracy",
    "gaussian_tradeoff",
    "input_robustness",
    "laplace_accuracy",
    "laplace_mbp_bound",
    "laplace_tradeoff",
    "log_capacity_gaussian",
    "log_capacity_laplace",
    "log_capacity_vmf",
    "mbp_estimate",
    "pac_robust_confidence",
    "perfect_privacy",
    "perfect_privacy_tradeoff",
    "pld_functionals",
    "posterior_from_matches",
    "secret_radius",
    "symmetric_delta",
    "theorem3_bound",
    "tradeoff_from_privacy_profile",
    "tradeoff_functionals",
    "vmf_accuracy",
    "vmf_angle_quantile",
    "vmf_mbp_bound",
    "vmf_tradeoff",
]
