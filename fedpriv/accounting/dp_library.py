"""The Gaussian and Laplace routes through Google's dp-accounting (not re-derived here).

* RDP of the Poisson-subsampled Gaussian: ``RdpAccountant`` composing
  ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))`` once; its ``rdp`` property is the per-step
  curve, which the ledger multiplies by the count (= ``SelfComposedDpEvent``).
* PLDs: the factories that ``PLDAccountant`` itself calls for
  ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))`` / ``…LaplaceDpEvent(λ)`` (connect-the-dots,
  pessimistic, add/remove), so that Gaussian/Laplace PLDs compose with the VMF PLD of
  ``vmf_pld.py``. Tests check agreement with ``RdpAccountant`` and ``PLDAccountant``.

The PLD factories size their grid before dp-accounting allocates it (:mod:`.pld_grid`): from
a coarse law of the privacy loss of the 1-D pair dp-accounting uses (``N(0, σ²)`` against
``N(1, σ²)``; ``Lap(0, λ)`` against ``Lap(1, λ)``) on 16,384 cells of the output, subsampled
as in ``vmf_pld.py``. The value discretisation is dp-accounting's default 1e-4 where the
single release and its ``steps``-fold composition fit the point budget, else the finest that
fits; a composition too long for any accurate grid (σ = 1, q = 0.01, T = 1e12) is refused in
milliseconds instead of failing in the FFT (a 2.2 TiB allocation). The parameter ranges keep
dp-accounting's arithmetic finite: it squares σ (overflow beyond about 1e154), overflows for
σ ≤ 1e-5, and evaluates ``exp(1/λ)`` (overflow below λ ≈ 1/709.8).

dp-accounting is imported inside the functions: importing it costs about a second.

References
----------
.. [1] Google, dp-accounting (``dp_accounting.rdp``, ``dp_accounting.pld``;
   ``privacy_loss_mechanism.GaussianPrivacyLoss`` truncates the Gaussian where its CDF is
   ``e^{−50}/2``).
.. [2] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, "Connect the dots: tighter
   discrete approximations of privacy loss distributions", PETS 2022.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from scipy import special

from fedpriv.accounting.pld_grid import GridNeed, resolve_discretization, subsampled_laws
from fedpriv.validate import check_dim, check_in_range, check_rate

__all__ = [
    "DEFAULT_DISCRETIZATION",
    "GAUSSIAN_RDP_RANGE",
    "LAPLACE_SCALE_RANGE",
    "NOISE_MULTIPLIER_RANGE",
    "gaussian_grid_need",
    "gaussian_pld",
    "gaussian_subsampled_rdp",
    "gaussian_without_replacement_rdp",
    "laplace_grid_need",
    "laplace_pld",
]

DEFAULT_DISCRETIZATION = 1e-4
"""dp-accounting's default value discretisation, used wherever it fits the point budget."""
NOISE_MULTIPLIER_RANGE = (1e-4, 1e100)
"""σ accepted by the Gaussian PLD: dp-accounting's Gaussian PLD overflows ("math range error",
after 6–25 s) from σ = 1e-5 down (measured), and one release at σ = 1e-4 already has ε ≈ 5·10⁷;
beyond 1e100 one release has ε = 0 to double precision."""
GAUSSIAN_RDP_RANGE = (1e-150, 1e150)
"""σ accepted by the subsampled Gaussian's RDP: dp-accounting divides by ``2σ²``, which is 0
(a ZeroDivisionError) from σ ≈ 1e-162 down and infinite from σ ≈ 1e154 up (measured: σ = 1e-160
already gives ε = ∞ through overflow warnings)."""
LAPLACE_SCALE_RANGE = (1.0 / 700.0, 1e100)
"""λ accepted by the Laplace PLD (dp-accounting overflows ``exp(1/λ)`` below about 1/709.8)."""
_CELLS = 16_384
log = logging.getLogger(__name__)
_WARNED: set[str] = set()  # dp-accounting warnings already logged by this process


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _dp_accounting_warnings_once() -> Iterator[None]:
    """Run dp-accounting with its warnings logged once per process, through this module's logger.

    dp-accounting warns through absl, which installs a handler on the root logger when it has
    none (``logging.basicConfig``); from then on every propagating logger — Flower's among them
    — prints each line twice, and the RDP accountant warns once per Rényi order it cannot
    evaluate (seven lines per sampling rate at q ≈ 0.2). While dp-accounting runs, its records
    are kept instead (the root logger holds a silent handler, so absl leaves it alone); each
    distinct warning is then logged once.
    """
    absl, root = logging.getLogger("absl"), logging.getLogger()
    keep, silent, propagate = _Keep(), logging.NullHandler(), absl.propagate
    absl.addHandler(keep)
    absl.propagate = False
    root.addHandler(silent)
    try:
        yield
    finally:
        root.removeHandler(silent)
        absl.removeHandler(keep)
        absl.propagate = propagate
        for record in keep.records:
            if str(record.msg) not in _WARNED:
                _WARNED.add(str(record.msg))
                log.warning("dp-accounting (repeats not shown): %s", record.getMessage())
_GAUSSIAN_Z = -float(special.ndtri(0.5 * math.exp(-50.0)))  # dp-accounting's truncation, 10.2σ


def gaussian_subsampled_rdp(
    orders: Sequence[float], noise_multiplier: float, sample_rate: float
) -> np.ndarray:
    """Per-step RDP curve of the Poisson-subsampled Gaussian from dp-accounting's accountant.

    Raises
    ------
    InputError
        ``noise_multiplier`` outside :data:`GAUSSIAN_RDP_RANGE`.
    """
    from dp_accounting import dp_event

    return _gaussian_rdp(orders, noise_multiplier, lambda gaussian: (
        dp_event.PoissonSampledDpEvent(sample_rate, gaussian)), replace_one=False)


def _gaussian_rdp(
    orders: Sequence[float], noise_multiplier: float, sampled: Any, *, replace_one: bool
) -> np.ndarray:
    """dp-accounting's per-step RDP curve of ``sampled(GaussianDpEvent(σ))``, σ range-checked."""
    from dp_accounting import NeighboringRelation, dp_event, rdp

    check_in_range("noise_multiplier", noise_multiplier, *GAUSSIAN_RDP_RANGE,
                   "the Gaussian RDP's numeric range")
    relation = (NeighboringRelation.REPLACE_ONE if replace_one
                else NeighboringRelation.ADD_OR_REMOVE_ONE)
    accountant = rdp.RdpAccountant(orders=list(orders), neighboring_relation=relation)
    with _dp_accounting_warnings_once():
        accountant.compose(sampled(dp_event.GaussianDpEvent(noise_multiplier)))
    return accountant.rdp


def _normal_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``Φ(b) − Φ(a)``, from the nearer tail so that neither tail loses its digits."""
    return np.where(a > 0.0, special.ndtr(-a) - special.ndtr(-b), special.ndtr(b) - special.ndtr(a))


def gaussian_grid_need(noise_multiplier: float, sample_rate: float, steps: int = 1) -> GridNeed:
    """Sizes of the ``steps``-fold composed Poisson-subsampled Gaussian PLD (module docstring).

    Raises
    ------
    InputError
        ``noise_multiplier`` outside :data:`NOISE_MULTIPLIER_RANGE`, ``sample_rate`` outside
        (0, 1], ``steps`` not an integer ≥ 1.
    """
    sigma = check_in_range("noise_multiplier", noise_multiplier, *NOISE_MULTIPLIER_RANGE,
                           "the Gaussian PLD's numeric range")
    q, steps = check_rate("sample_rate", sample_rate), check_dim("steps", steps)
    edges = np.linspace(-_GAUSSIAN_Z * sigma, 1.0 + _GAUSSIAN_Z * sigma, _CELLS + 1)
    middle = 0.5 * (edges[:-1] + edges[1:])

    def loss(x: np.ndarray) -> np.ndarray:  # log N(x; 1, σ²)/N(x; 0, σ²)
        return (x - 0.5) / sigma / sigma

    z_q, z_p = edges / sigma, (edges - 1.0) / sigma
    mass_q, mass_p = _normal_mass(z_q[:-1], z_q[1:]), _normal_mass(z_p[:-1], z_p[1:])
    laws = subsampled_laws(loss(middle), mass_p, mass_q, tuple(loss(edges[[0, -1]])), q)
    return GridNeed(laws, steps, "noise_multiplier", sigma)


def laplace_grid_need(laplace_scale: float, sample_rate: float, steps: int = 1) -> GridNeed:
    """Sizes of the ``steps``-fold composed Poisson-subsampled Laplace PLD (module docstring).

    The loss ``(|x| − |x−1|)/λ`` is ``∓1/λ`` outside ``[0, 1]`` (two atoms) and linear inside.

    Raises
    ------
    InputError
        ``laplace_scale`` outside :data:`LAPLACE_SCALE_RANGE`, ``sample_rate`` outside (0, 1],
        ``steps`` not an integer ≥ 1.
    """
    lam = check_in_range("laplace_scale", laplace_scale, *LAPLACE_SCALE_RANGE,
                         "the Laplace PLD's numeric range")
    q, steps = check_rate("sample_rate", sample_rate), check_dim("steps", steps)
    edges = np.linspace(0.0, 1.0, _CELLS + 1)
    a, b = edges[:-1], edges[1:]
    gap = -np.expm1(-(b - a) / lam)
    tail = 0.5 * math.exp(-1.0 / lam)
    mass_q = np.concatenate([[0.5], 0.5 * np.exp(-a / lam) * gap, [tail]])
    mass_p = np.concatenate([[tail], 0.5 * np.exp((b - 1.0) / lam) * gap, [0.5]])
    loss = np.concatenate([[-1.0 / lam], (a + b - 1.0) / lam, [1.0 / lam]])
    laws = subsampled_laws(loss, mass_p, mass_q, (-1.0 / lam, 1.0 / lam), q)
    return GridNeed(laws, steps, "laplace_scale", lam)


def gaussian_pld(
    noise_multiplier: float, sample_rate: float, discretization: float | None = None, *,
    steps: int = 1,
) -> Any:
    """PLD of one Poisson-subsampled Gaussian release (as ``PLDAccountant`` builds it).

    ``discretization=None`` chooses Δ for ``steps`` compositions (module docstring):
    ``choose_discretization([gaussian_grid_need(σ, q, steps)], DEFAULT_DISCRETIZATION)``.
    Raises :class:`~fedpriv.errors.InputError` as :func:`gaussian_grid_need` and
    :func:`~fedpriv.accounting.pld_grid.resolve_discretization` do.
    """
    need = gaussian_grid_need(noise_multiplier, sample_rate, steps)
    step = resolve_discretization(need, discretization, DEFAULT_DISCRETIZATION)
    from dp_accounting.pld import privacy_loss_distribution as pld

    with _dp_accounting_warnings_once():
        return pld.from_gaussian_mechanism(
            standard_deviation=need.value,
            value_discretization_interval=step,
            sampling_prob=float(sample_rate),
        )


def laplace_pld(
    laplace_scale: float, sample_rate: float, discretization: float | None = None, *,
    steps: int = 1,
) -> Any:
    """PLD of one Poisson-subsampled Laplace release with ``λ = b/C`` (as ``PLDAccountant``).

    ``discretization=None`` chooses Δ for ``steps`` compositions (module docstring):
    ``choose_discretization([laplace_grid_need(λ, q, steps)], DEFAULT_DISCRETIZATION)``.
    Raises :class:`~fedpriv.errors.InputError` as :func:`laplace_grid_need` and
    :func:`~fedpriv.accounting.pld_grid.resolve_discretization` do.
    """
    need = laplace_grid_need(laplace_scale, sample_rate, steps)
    step = resolve_discretization(need, discretization, DEFAULT_DISCRETIZATION)
    from dp_accounting.pld import privacy_loss_distribution as pld

    with _dp_accounting_warnings_once():
        return pld.from_laplace_mechanism(
            parameter=need.value,
            value_discretization_interval=step,
            sampling_prob=float(sample_rate),
        )


def gaussian_without_replacement_rdp(
    orders: Sequence[float], noise_multiplier: float, population: int, sample_size: int
) -> np.ndarray:
    """Per-step RDP curve of the Gaussian on a fixed-size sample (``m`` of ``N`` without
    replacement) under replace-one neighbours, from dp-accounting's accountant
    (``SampledWithoutReplacementDpEvent``; Wang, Balle and Kasiviswanathan 2019, Thm. 27).
    ``noise_multiplier`` is over the replace-one sensitivity: the distance of the two signals.

    Raises
    ------
    InputError
        ``noise_multiplier`` outside :data:`GAUSSIAN_RDP_RANGE`.
    """
    from dp_accounting import dp_event

    return _gaussian_rdp(orders, noise_multiplier, lambda gaussian: (
        dp_event.SampledWithoutReplacementDpEvent(population, sample_size, gaussian)),
        replace_one=True)
