"""Estimators of what an attack learned, measured against ground truth or public knowledge:
not attacks themselves (those are :mod:`attacks.inversion`).

* :mod:`attacks.estimators.bayesian` — the empirical Bayesian privacy (MBP, ABP) of a
  reconstruction attack over a candidate pool (privacy-math.md §6);
* :mod:`attacks.estimators.game` — the identification game's likelihood-optimal attacker and
  its success rate against the Bayes-capacity bound (§13);
* :mod:`attacks.estimators.prior` — the prior baselines: what an attacker guesses from public
  data without the update (§7).

The scheduling and the store's rows are :mod:`strategies.attack_schedule`.
"""

__all__: list[str] = []
