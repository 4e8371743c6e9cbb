"""Canary audits: empirical lower bounds on ε beside the accountant's upper bound.

Gradient canaries (:mod:`~fedpriv.canaries.design`) are inserted into a client's clipped sums
with secret ½-inclusion; the server scores them in each release
(:mod:`~fedpriv.canaries.scores`) and turns in/out scores into an ε at δ with a stated
confidence (:mod:`~fedpriv.canaries.clopper_pearson`, :mod:`~fedpriv.canaries.one_run`,
:mod:`~fedpriv.canaries.gdp`), to be compared with the canary's own formal ε
(:mod:`~fedpriv.canaries.releases`); :mod:`~fedpriv.canaries.rounds` is what a federated run's
clients and server derive per client-round. privacy-math.md §10 and docs/canaries.md say what
the numbers mean. Pure NumPy/SciPy (dp-accounting for the GDP conversion); no Flower, no torch.
"""

from fedpriv.canaries.bound import EpsilonLowerBound
from fedpriv.canaries.clopper_pearson import epsilon_clopper_pearson
from fedpriv.canaries.design import (
    CanaryDesign,
    augmented_batch_size,
    canary_displacement,
    canary_sum,
    directions,
    inclusion,
)
from fedpriv.canaries.gdp import epsilon_gdp_fit, epsilon_gdp_thresholds, gdp_epsilon
from fedpriv.canaries.one_run import epsilon_one_run, one_run_p_value, one_run_test
from fedpriv.canaries.releases import canary_events
from fedpriv.canaries.rounds import ESTIMATORS, canary_epsilon, estimate, round_design
from fedpriv.canaries.scores import gaussian_scores, laplace_scores, projections, vmf_scores

__all__ = [
    "ESTIMATORS",
    "CanaryDesign",
    "EpsilonLowerBound",
    "augmented_batch_size",
    "canary_displacement",
    "canary_epsilon",
    "canary_events",
    "canary_sum",
    "directions",
    "epsilon_clopper_pearson",
    "epsilon_gdp_fit",
    "epsilon_gdp_thresholds",
    "epsilon_one_run",
    "estimate",
    "gaussian_scores",
    "gdp_epsilon",
    "inclusion",
    "laplace_scores",
    "one_run_p_value",
    "one_run_test",
    "projections",
    "round_design",
    "vmf_scores",
]
