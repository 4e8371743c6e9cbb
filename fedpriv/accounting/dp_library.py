"""The Gaussian and Laplace routes through Google's dp-accounting (not re-derived here).

* RDP of the Poisson-subsampled Gaussian: ``RdpAccountant`` composing
  ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))`` once; its ``rdp`` property is the per-step
  curve, which the ledger multiplies by the count (= ``SelfComposedDpEvent``).
* PLDs: the factories that ``PLDAccountant`` itself calls for
  ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))`` / ``…LaplaceDpEvent(λ)`` (connect-the-dots,
  pessimistic, add/remove), so that Gaussian/Laplace PLDs compose with the VMF PLD of
  ``vmf_pld.py``. Tests check agreement with ``RdpAccountant`` and ``PLDAccountant``.

dp-accounting is imported inside the functions: importing it costs about a second.

References
----------
.. [1] Google, dp-accounting (``dp_accounting.rdp``, ``dp_accounting.pld``).
.. [2] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect the dots: tighter
   discrete approximations of privacy loss distributions", PETS 2022.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["gaussian_pld", "gaussian_subsampled_rdp", "laplace_pld"]


def gaussian_subsampled_rdp(
    orders: Sequence[float], noise_multiplier: float, sample_rate: float
) -> np.ndarray:
    """Per-step RDP curve of the Poisson-subsampled Gaussian from dp-accounting's accountant."""
    from dp_accounting import dp_event, rdp

    accountant = rdp.RdpAccountant(orders=list(orders))
    accountant.compose(
        dp_event.PoissonSampledDpEvent(sample_rate, dp_event.GaussianDpEvent(noise_multiplier))
    )
    return accountant.rdp


def gaussian_pld(noise_multiplier: float, sample_rate: float, discretization: float) -> Any:
    """PLD of one Poisson-subsampled Gaussian release (as ``PLDAccountant`` builds it)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    return pld.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        value_discretization_interval=discretization,
        sampling_prob=sample_rate,
    )


def laplace_pld(laplace_scale: float, sample_rate: float, discretization: float) -> Any:
    """PLD of one Poisson-subsampled Laplace release with ``λ = b/C`` (as ``PLDAccountant``)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    return pld.from_laplace_mechanism(
        parameter=laplace_scale,
        value_discretization_interval=discretization,
        sampling_prob=sample_rate,
    )
