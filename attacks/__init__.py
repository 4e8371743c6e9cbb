"""Gradient-inversion attacks on the server's view of an update, and their scoring.

The attacks themselves are :mod:`attacks.inversion` (configurations of one gradient matcher);
the rest of the package is their infrastructure. The entry point :func:`run_attack` receives
only a :class:`ServerView` (no ground truth); :mod:`attacks.scoring` and
:mod:`attacks.estimators.bayesian` compare the results with the truth.
"""

from attacks.estimators.bayesian import (
    BayesianPrivacyEstimate,
    candidate_counts,
    estimate_bayesian_privacy,
)
from attacks.labels import recover_labels
from attacks.registry import attack_names, check_attack, run_attack
from attacks.result import AttackResult
from attacks.runner import EXECUTORS, AttackJob, run_attacks
from attacks.scoring import (
    ReconstructionScore,
    label_accuracy,
    match_reconstructions,
    relative_leakage,
    score_reconstruction,
)
from attacks.simulate import simulate_view
from attacks.view import ServerView

__all__ = [
    "EXECUTORS",
    "AttackJob",
    "AttackResult",
    "BayesianPrivacyEstimate",
    "ReconstructionScore",
    "ServerView",
    "attack_names",
    "candidate_counts",
    "check_attack",
    "estimate_bayesian_privacy",
    "label_accuracy",
    "match_reconstructions",
    "recover_labels",
    "relative_leakage",
    "run_attack",
    "run_attacks",
    "score_reconstruction",
    "simulate_view",
]
