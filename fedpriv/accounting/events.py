"""What a client released, apart from how it is accounted (cf. dp-accounting's ``DpEvent``).

A :class:`Release` is one unsubsampled noisy release of a mechanism, described by the public
parameter that governs its privacy, in sensitivity units (``noise_multiplier`` σ = Gaussian noise
std over the ℓ2 bound, ``laplace_scale`` λ = Laplace scale over the ℓ1 bound, ``kappa`` κ for
the VMF, whose ``dim`` is the dimension of the released vector). Each mechanism defines its own
frozen subclass next to the mechanism (``fedpriv/mechanisms/<name>.py``), carrying everything
accounting and leakage need: its RDP curve (privacy-math.md §3), its PLD, its trade-off function
(§4), its Bayes capacity (§5) and its pure LDP parameter (§6). The accountants, the calibration,
the capacity tally and the command line are generic over this interface.

A :class:`ReleaseEvent` is ``count`` such releases, each on a sample drawn as the code drew it
(privacy-math.md §14): Poisson at rate ``sample_rate``, or, with a ``population`` ``N``, a
fixed-size sample of ``m = sample_rate·N`` without replacement. Accountants consume sequences of
events; the audit store records them. How neighbours differ (add/remove one example, or replace
one) is the accountant's argument, not the event's (:mod:`fedpriv.accounting.sampling`), except
for a client-level release, whose own class says which (``fedpriv/mechanisms/client_gaussian.py``,
privacy-math.md §11).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

import numpy as np

from fedpriv.errors import InputError
from fedpriv.validate import number

__all__ = ["NEIGHBOURING_RELATIONS", "NoGuarantee", "Release", "ReleaseEvent"]

NEIGHBOURING_RELATIONS = ("add-remove", "replace-one")
"""Add or remove one example; replace one example by another (privacy-math.md §14)."""


class Release(ABC):
    """One unsubsampled noisy release, in sensitivity units (subclasses are frozen dataclasses).

    Class attributes
    ----------------
    mechanism
        The registry name of the mechanism that makes this release.
    parameter_name
        The public parameter its privacy depends on (``None`` when it has none).
    more_noise
        ``+1`` if a larger parameter means more noise (σ, λ), ``−1`` if less (κ); calibration
        searches in this direction.
    pld_discretization
        Default value discretisation of its PLD.
    parameter_help
        One line on the parameter (command-line help).
    spec_names
        Short names accepted in ``fedpriv compare`` specs (``sigma`` for ``noise_multiplier``).
    absolute_noise
        The name of the noise scale in absolute units (``parameter × sensitivity``: ``noise_std``
        for the Gaussian), as ``fedpriv capacity`` takes it; ``None`` when the parameter is
        scale-free (κ).
    """

    mechanism: ClassVar[str]
    parameter_name: ClassVar[str | None] = None
    more_noise: ClassVar[int] = 1
    pld_discretization: ClassVar[float] = 1e-4
    parameter_help: ClassVar[str] = ""
    spec_names: ClassVar[dict[str, str]] = {}
    absolute_noise: ClassVar[str | None] = None

    @property
    def parameter(self) -> float | None:
        """The value of :attr:`parameter_name` (``None`` for a release without one)."""
        return None if self.parameter_name is None else getattr(self, self.parameter_name)

    @property
    def formal_guarantee(self) -> bool:
        """Whether the release satisfies a differential-privacy guarantee."""
        return True

    def with_parameter(self, value: float) -> Release:
        """The same release with another value of its parameter (calibration's factory)."""
        if self.parameter_name is None:
            raise InputError("mechanism", self.mechanism, "a mechanism with a noise parameter")
        return replace(self, **{self.parameter_name: value})

    @abstractmethod
    def rdp(self, orders: np.ndarray) -> np.ndarray:
        """RDP ``τ_α`` of the release at each order (privacy-math.md §3)."""

    def subsampled_rdp(self, orders: tuple[float, ...], sample_rate: float) -> np.ndarray:
        """RDP of the Poisson-subsampled release: Zhu & Wang (2019, Thm. 5) over :meth:`rdp`,
        capped by the unsubsampled curve (:func:`fedpriv.accounting.subsampling.subsampled_rdp`).
        A mechanism with a tighter maintained analysis overrides this."""
        from fedpriv.accounting.subsampling import subsampled_rdp

        return subsampled_rdp(np.array(orders), self.rdp, sample_rate)

    @abstractmethod
    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        """Pessimistic dp-accounting ``PrivacyLossDistribution`` of one Poisson-subsampled
        release (``sample_rate = 1``: the release itself), at a discretisation fit for
        composing it ``steps`` times (``None``: chosen to fit the memory budget,
        :mod:`fedpriv.accounting.pld_grid`)."""

    @abstractmethod
    def grid_need(self, sample_rate: float, steps: int) -> Any:
        """What its PLD composed ``steps`` times needs of a grid
        (:class:`fedpriv.accounting.pld_grid.GridNeed`), estimated before anything is built."""

    @abstractmethod
    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        """Trade-off function ``f(α)`` of one release (privacy-math.md §4)."""

    @abstractmethod
    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        """``log C_Bayes`` of one release for secrets within ``radius`` sensitivities
        (privacy-math.md §5; ``radius = 1``: record level, ``L``: batch level)."""

    def pure_ldp_epsilon(self, radius: float) -> float:
        """Pure LDP parameter ξ of one release for secrets within ``radius`` sensitivities (the
        MBP bound of privacy-math.md §6); ``inf`` when the release has no finite one."""
        return math.inf

    @classmethod
    def calibration_start(cls, dim: int | None) -> Release:
        """A release to start calibration from (its parameter is the search's first point)."""
        raise InputError("mechanism", cls.mechanism, "a mechanism with a noise parameter")

    def gaussian_equivalent(self, dim: int) -> float | None:
        """σ of the Gaussian release this one resembles, where one does (else None)."""
        return None

    def central(self) -> Release | None:
        """A client-level release (privacy-math.md §11) as a third party that sees only the
        aggregate meets it: add/remove of a client, to be Poisson-sampled at the server's
        client rate and composed over every round. None for a record-level release."""
        return None

    def doubled(self) -> Release:
        """The release at twice its sensitivity: the pair of a neighbour that moves the signal
        by up to ``2Δ`` (fixed-size sampling under add/remove, privacy-math.md §14). A
        mechanism without one cannot be accounted under fixed-size sampling."""
        raise InputError("sampling", "fixed-size", f"a mechanism whose release at twice its "
                         f"sensitivity is known ({self.mechanism} does not say)")

    @property
    def noise_law(self) -> tuple[str, float] | None:
        """``(law, scale)`` of a 1-D additive-noise pair in sensitivity units (``"gaussian"``
        with σ, ``"laplace"`` with λ), which the replace-one mixture PLD takes
        (:mod:`fedpriv.accounting.mixture_pld`); None for another kind of release."""
        return None

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the audit store."""
        return {"mechanism": self.mechanism, **asdict(self)}  # type: ignore[call-overload]


@dataclass(frozen=True)
class NoGuarantee(Release):
    """A release without a formal guarantee: no noise (``none``, ``clip``), σ = 0, or the VMF
    with its true norm released. Infinite RDP, LDP parameter and capacity; the blatantly
    non-private trade-off ``f ≡ 0``."""

    name: str = "none"

    @property
    def mechanism(self) -> str:  # type: ignore[override]
        """The mechanism that made the release (``none``, ``clip``, ``gaussian`` with σ = 0...)."""
        return self.name

    @property
    def formal_guarantee(self) -> bool:
        return False

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        return np.full(np.shape(orders), math.inf)

    def pld(self, sample_rate: float, discretization: float | None, *, steps: int = 1) -> Any:
        raise InputError("mechanism", self.name, "a mechanism with a formal guarantee")

    def grid_need(self, sample_rate: float, steps: int) -> Any:
        raise InputError("mechanism", self.name, "a mechanism with a formal guarantee")

    def tradeoff(self, alpha: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(alpha))

    def log_bayes_capacity(self, dim: int, radius: float) -> float:
        return math.inf

    def doubled(self) -> Release:
        return self

    def as_dict(self) -> dict[str, Any]:
        return {"mechanism": self.name, "formal_guarantee": False}


POPULATION_MAX = 2**53
"""Largest population of a fixed-size sample (``m = q·N`` is exact in a double up to it)."""


@dataclass(frozen=True)
class ReleaseEvent:
    """``count`` releases, each on a sample drawn at rate ``sample_rate``: Poisson when
    ``population`` is None, else ``m = sample_rate·population`` of the ``population`` without
    replacement (a fixed-size sample, privacy-math.md §14)."""

    release: Release
    sample_rate: float
    count: int
    population: int | None = None

    def __post_init__(self) -> None:
        rate = number(self.sample_rate)
        if not 0.0 < rate <= 1.0:
            raise InputError("sample_rate", self.sample_rate, "a sampling rate in (0, 1]")
        count = number(self.count)
        if isinstance(self.count, bool) or not math.isfinite(count) or count < 1 or count % 1:
            raise InputError("steps", self.count, "an integer number of releases >= 1")
        object.__setattr__(self, "sample_rate", rate)  # normalise types; validated above
        object.__setattr__(self, "count", int(count))
        if self.population is not None:
            self._check_population()

    def _check_population(self) -> None:
        size = number(self.population)
        if (isinstance(self.population, bool) or not math.isfinite(size) or size % 1
                or not 1 <= size <= POPULATION_MAX):
            raise InputError("population", self.population,
                             f"an integer number of records or clients in [1, {POPULATION_MAX}]")
        sample = self.sample_rate * size
        if abs(sample - round(sample)) > 1e-6 * max(1.0, sample):
            raise InputError("sample_rate", self.sample_rate, f"m/N for an integer sample size "
                             f"m of the population N = {int(size)}")
        object.__setattr__(self, "population", int(size))

    @property
    def sample_size(self) -> int | None:
        """``m`` of a fixed-size sample (None under Poisson sampling)."""
        return None if self.population is None else round(self.sample_rate * self.population)

    @property
    def sampling(self) -> str:
        """``"poisson"``, ``"fixed-size"`` or ``"none"`` (every record in every release).
        A fixed-size sample of all ``N`` records is still fixed-size: under add/remove the
        added record displaces one of the ``N`` (:mod:`.sampling`), as for a client whose
        claimed size the server could not verify and whose batch of ``m`` may be its every
        record (:meth:`fedpriv.ledger.PrivacyLedger.fold`)."""
        if self.sample_rate == 1.0 and self.population is None:
            return "none"
        return "poisson" if self.population is None else "fixed-size"

    @property
    def step(self) -> tuple[Release, float]:
        """The per-release part ``(release, sample_rate)``: events sharing it compose by count."""
        return self.release, self.sample_rate

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the audit store."""
        out = {"release": self.release.as_dict(), "sample_rate": self.sample_rate,
               "count": self.count}
        return out if self.population is None else {**out, "population": self.population}
