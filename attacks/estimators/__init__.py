"""Estimators of what an attack learned, measured against ground truth or public knowledge:
not attacks themselves (those are :mod:`attacks.inversion`).

* :mod:`attacks.estimators.bayesian` — the empirical Bayesian privacy (MBP, ABP) of a
  reconstruction attack over a candidate pool (privacy-math.md §6);
* :mod:`attacks.estimators.game` — the identification game's likelihood-optimal attacker and
  its success rate against the Bayes-capacity bound (§13);
* :mod:`attacks.estimators.prior` — the priors: the no-update prior (the public mean image,
  before any update) and the label prior (the public class means of the labels the update
  gives away), and the within-class identification score against public look-alikes (§7, §13).

The scheduling and the store's rows are :mod:`strategies.attack_schedule`.
"""

__all__: list[str] = []
