"""The mechanism interface, the declaration of its parameters, and the clipping most share.

A :class:`Mechanism` is one file in this package (``none.py``, ``gaussian.py``, ...): a frozen
dataclass whose fields are its public parameters, each declared with :func:`param` (default and
checker), plus

* :meth:`~Mechanism.privatize` — the noisy release of one batch (privacy-math.md §2), computed
  from a :class:`~fedpriv.gradients.GradientSource`;
* :meth:`~Mechanism.release` — the :class:`~fedpriv.accounting.events.Release` it makes, which
  carries everything accounting and leakage need (RDP, PLD, trade-off, capacity, LDP bound).

Defining a subclass with a ``name`` registers it (:mod:`fedpriv.mechanisms.registry` imports
every module of this package): configuration choices, command-line choices, the accountant and
the report all read the registry, so adding a mechanism is adding one file.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedpriv.errors import InputError
from fedpriv.validate import Check, check_in_range, check_nonnegative, check_positive_list

if TYPE_CHECKING:
    import torch

    from fedpriv.accounting.events import Release
    from fedpriv.canaries import CanaryDesign
    from fedpriv.gradients import GradientSource
    from fedpriv.verification import ClientUpdate, Verdict
    from fedpriv.verification.observed import NoiseObservation
    from fedpriv.verification.verdict import Checked

__all__ = [
    "CLIP_RANGE",
    "LEVELS",
    "MAX_KAPPA",
    "MAX_NOISE",
    "MIN_NOISE",
    "NOISE_ALLOWED",
    "REGISTERED",
    "ClippedMechanism",
    "Mechanism",
    "ParamValue",
    "check_batch_size",
    "check_clip",
    "check_clip_list",
    "check_noise",
    "param",
]

ParamValue = float | int | str | bool | list[float]

MAX_NOISE = 1e6
"""Largest noise scale a mechanism takes (σ, λ): beyond it the update is pure noise, and the
accountants' numerics (dp-accounting squares σ) would be asked for ε ≈ 0 of no use."""
MIN_NOISE = 1e-4
"""Smallest non-zero noise scale (σ, λ): dp-accounting's Gaussian PLD overflows below it
(:data:`fedpriv.accounting.dp_library.NOISE_MULTIPLIER_RANGE`) and its RDP divides by σ²
(a ZeroDivisionError below σ ≈ 1e-162); one release at σ = 1e-4 already has ε ≈ 5·10⁷."""
CLIP_RANGE = (1e-6, 1e6)
"""Clip bounds ``C`` (each ``C_r`` of ``clip_per_layer``, the VMF's released norm ``s``) a
mechanism takes. The noise on the sum, ``σ·C`` (Laplace: ``λ·C``), is drawn and added in
float32: with ``σ, λ`` in ``[MIN_NOISE, MAX_NOISE]`` and ``C`` in this range it lies in
``[1e-10, 1e12]``, far from float32's smallest normal number (1.2e-38), and squares of ten
standard deviations of it summed over 10⁷ coordinates (≤ 10³³) stay below float32's largest
(3.4e38). (``clip = 1e308`` made ``σ·C`` infinite in float32 and every update non-finite.)"""
MAX_KAPPA = 1e6
"""Largest VMF concentration a mechanism takes: the VMF PLD's range
(:mod:`fedpriv.accounting.vmf_pld`); at κ = 10⁶ and p ≤ 10⁷ the release is nearly noiseless."""

LEVELS = ("record", "client")
"""The units of privacy a mechanism can protect (:attr:`Mechanism.level`)."""

REGISTERED: dict[str, type[Mechanism]] = {}
"""Every concrete mechanism class by name, filled as their modules are imported (read it
through :mod:`fedpriv.mechanisms.registry`, which imports them all)."""


def param(default: Any, check: Check, allowed: str, *, optional: bool = False,
          doc: str = "") -> Any:
    """A mechanism parameter: a dataclass field with its default and checker.

    ``allowed`` says what is allowed (config error messages and docs); ``optional`` parameters
    may be left unset (``None``), meaning "derived from the others"; ``doc`` says what the
    parameter does (the config reference; a noise parameter's is its release class's
    ``parameter_help``).
    """
    meta = {"check": check, "allowed": allowed, "optional": optional, "doc": doc}
    return field(default=default, metadata=meta)


def check_noise(key: str, value: Any) -> float:
    """A noise scale: 0 (no noise, no guarantee) or a number in ``[MIN_NOISE, MAX_NOISE]``."""
    v = check_nonnegative(key, value, maximum=MAX_NOISE)
    if 0.0 < v < MIN_NOISE:
        raise InputError(key, value, NOISE_ALLOWED)
    return v


NOISE_ALLOWED = f"0 (no noise) or a number in [{MIN_NOISE:g}, {MAX_NOISE:g}]"
"""What :func:`check_noise` allows, in words."""
_CLIP_WHY = "the range in which the float32 noise sigma*C neither overflows nor vanishes"


def check_clip(key: str, value: Any) -> float:
    """A clip bound in :data:`CLIP_RANGE`."""
    return check_in_range(key, value, *CLIP_RANGE, _CLIP_WHY)


def check_clip_list(key: str, value: Any) -> tuple[float, ...]:
    """Per-layer clip bounds: a non-empty list (or comma-separated string) of numbers, each in
    :data:`CLIP_RANGE`."""
    values = check_positive_list(key, value)
    if not all(CLIP_RANGE[0] <= v <= CLIP_RANGE[1] for v in values):
        raise InputError(key, value, f"numbers in [{CLIP_RANGE[0]:g}, {CLIP_RANGE[1]:g}] "
                         f"({_CLIP_WHY})")
    return values


def parameter_fields(cls: type) -> list[dataclasses.Field]:
    """The dataclass fields of ``cls`` declared with :func:`param`, in declaration order."""
    return [f for f in dataclasses.fields(cls) if "check" in f.metadata]


class Mechanism(ABC):
    """One noisy release of a client's aggregated per-example gradients.

    Class attributes
    ----------------
    name
        The registry name (``mechanism.name`` in configs).
    label
        Display name in tables and figures.
    norm_ord
        The norm its sensitivity is measured in (1 for Laplace, else 2).
    additive
        Whether the release is ``(S + N)/L`` with noise ``N`` independent of the sum ``S``: a
        known vector added to ``S`` (canaries) then shifts the release by itself over ``L``,
        and the server can remove it from the update exactly.
    level
        The unit of privacy (:data:`LEVELS`): ``"record"`` — each local step's batch is
        privatised (DP-SGD, privacy-math.md §2) — or ``"client"`` — local training is plain
        and the whole update is privatised (§11; ``client_gaussian.py``).
    """

    name: ClassVar[str]
    label: ClassVar[str]
    norm_ord: ClassVar[int] = 2
    additive: ClassVar[bool] = False
    level: ClassVar[str] = "record"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if name is not None:
            if name in REGISTERED and REGISTERED[name].__qualname__ != cls.__qualname__:
                raise TypeError(f"two mechanisms named {name!r}")
            if cls.level not in LEVELS:
                raise TypeError(f"mechanism {name!r}: level {cls.level!r} not in {LEVELS}")
            REGISTERED[name] = cls

    @classmethod
    def from_params(cls, params: Mapping[str, Any], key_prefix: str = "mechanism") -> Mechanism:
        """Validate the parameters this mechanism declares (keys it does not use are ignored;
        errors name ``f"{key_prefix}.<param>"``) and build it."""
        values = {}
        for f in parameter_fields(cls):
            value = params.get(f.name, f.default)
            if value is None and f.metadata["optional"]:
                values[f.name] = None
                continue
            values[f.name] = f.metadata["check"](f"{key_prefix}.{f.name}", value)
        mech = cls(**values)
        mech.check(key_prefix)
        return mech

    def check(self, key_prefix: str) -> None:
        """Checks across parameters, after each was validated alone (none by default)."""
        return None

    def params(self) -> dict[str, ParamValue]:
        """Public parameters, flat; ``build_mechanism(m.name, m.params())`` rebuilds ``m``."""
        out: dict[str, ParamValue] = {}
        for f in parameter_fields(type(self)):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @property
    @abstractmethod
    def sensitivity(self) -> float:
        """Bound on one example's contribution to the sum (ℓ1 for Laplace, else ℓ2)."""

    @abstractmethod
    def privatize(
        self, source: GradientSource, generator: torch.Generator, *, batch_size: float
    ) -> torch.Tensor:
        """The released update of one batch, a ``(p,)`` tensor.

        ``batch_size`` is the public expected batch size ``L`` the sum is divided by; the actual
        batch may be larger or smaller (Poisson sampling) and may be empty. ``generator`` is the
        only source of randomness.
        """

    @abstractmethod
    def release(self, dim: int) -> Release:
        """What one release of this mechanism on a ``dim``-parameter model is, for accounting."""

    def check_layers(self, layer_sizes: Sequence[int]) -> None:
        """Raise InputError if the mechanism's parameters do not fit a model with these
        parameter sizes (checked before training starts); nothing to check by default."""
        return None

    def pac_accuracy(self, beta: float, dim: int, batch_size: float) -> float | None:
        """Standard accuracy α of ONE release at confidence ``1 − β``: the (1 − β)-quantile of
        the distance between the release and the value it perturbs, read from the noise law of
        the mechanism as declared — not measured (Zhang & Chen, Def. 4.4, Thm. 4.3;
        :mod:`fedpriv.leakage.robustness`, whose quantile functions the mechanisms call).

        ``dim`` is the model dimension ``p``, ``batch_size`` the divisor ``L`` of the noisy sum.
        None: the mechanism states no accuracy (the default, and ``none``).
        """
        return None

    def verify(self, update: ClientUpdate, alpha: float) -> Verdict:
        """Test a recovered update against this mechanism as declared, at false-alarm rate
        ``alpha`` per test (privacy-math.md §9; :mod:`fedpriv.verification`). A mechanism
        without a test says so: ``unverifiable``."""
        from fedpriv.verification import unverifiable

        return unverifiable(self.name, f"no test of an update against mechanism {self.name}")

    def verify_many(self, updates: Sequence[ClientUpdate], alpha: float) -> list[Checked]:
        """:meth:`verify` of each update, in order, or what it raised for that update
        (:data:`~fedpriv.verification.verdict.Checked`: one hostile update never costs the
        others their verdicts), for updates recovered under one declaration of this mechanism
        (a round's replies that share it): a mechanism whose checks share work across them
        overrides this with the same verdicts, faster."""
        from fedpriv.verification.verdict import attempted

        return [attempted(partial(self.verify, update, alpha)) for update in updates]

    def observe(self, update: ClientUpdate) -> NoiseObservation | str:
        """What a recovered update shows of this mechanism's noise, for ``epsilon_observed``
        (:mod:`fedpriv.verification.observed`), or why it shows nothing (the default: no noise
        scale of this mechanism can be measured from its releases)."""
        return f"not observable: no noise scale of mechanism {self.name} to measure"

    def observe_many(self, updates: Sequence[ClientUpdate]) -> list[NoiseObservation | str]:
        """:meth:`observe` of each update, in order, for updates recovered under one
        declaration of this mechanism: a mechanism that measures them faster together
        overrides this with the same observations."""
        return [self.observe(update) for update in updates]

    def canary_scores(
        self, design: CanaryDesign, pseudo_gradient: np.ndarray, *, batch_size: float,
        steps: int,
    ) -> np.ndarray | None:
        """Per-canary scores (higher: "in") of one round's update ``Δ``, from ``−Δ/η``
        (privacy-math.md §10, :mod:`fedpriv.canaries.scores`); None where this mechanism's
        releases are not scored."""
        return None


def check_batch_size(batch_size: float) -> None:
    """Reject a non-positive or non-finite expected batch size."""
    if not (math.isfinite(batch_size) and batch_size > 0):
        raise ValueError(f"privatize: batch_size must be finite and > 0, got {batch_size!r}")


@dataclass(frozen=True)
class ClippedMechanism(Mechanism, ABC):
    """A mechanism that clips each example (flat to ``clip``, or per layer) and sums.

    Subclasses set ``norm_ord`` (2, or 1 for Laplace) and implement :meth:`_release`; the
    release is additive unless a subclass says otherwise (the VMF's is a direction).
    """

    additive: ClassVar[bool] = True

    clip: float = param(1.0, check_clip, f"a number in [{CLIP_RANGE[0]:g}, {CLIP_RANGE[1]:g}]",
                        doc="The bound C each example's gradient is clipped to (l2; l1 for "
                        "Laplace).")
    clip_per_layer: tuple[float, ...] | None = param(
        None, check_clip_list, f"a non-empty list of numbers in [{CLIP_RANGE[0]:g}, "
        f"{CLIP_RANGE[1]:g}], one per model parameter", optional=True,
        doc="Per-layer clipping: one bound C_r per parameter tensor instead of clip.",
    )

    @property
    def sensitivity(self) -> float:
        """``C`` (flat), or ``‖(C_1, …, C_R)‖`` in the clipping norm (per layer)."""
        if self.clip_per_layer is None:
            return self.clip
        return float(np.linalg.norm(self.clip_per_layer, ord=self.norm_ord))

    @property
    def clip_bounds(self) -> tuple[float, ...]:
        """``(C,)`` for flat clipping, else one ``C_r`` per model parameter."""
        return (self.clip,) if self.clip_per_layer is None else tuple(self.clip_per_layer)

    def check_layers(self, layer_sizes: Sequence[int]) -> None:
        """Raise InputError if per-layer bounds do not match the model's parameters."""
        if self.clip_per_layer is not None and len(layer_sizes) != len(self.clip_per_layer):
            raise InputError(
                "mechanism.clip_per_layer", list(self.clip_per_layer),
                f"one bound per model parameter ({len(layer_sizes)} of them)",
            )

    def privatize(
        self, source: GradientSource, generator: torch.Generator, *, batch_size: float
    ) -> torch.Tensor:
        check_batch_size(batch_size)
        self.check_layers(source.layer_sizes)
        clipped = source.clipped_sum(self.clip_bounds, self.norm_ord)
        return self._release(clipped, generator, batch_size)

    @abstractmethod
    def _release(
        self, clipped_sum: torch.Tensor, generator: torch.Generator, batch_size: float
    ) -> torch.Tensor:
        """The released update given ``Σ ḡ_i``."""

    def draw_noise(self, like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The noise an additive release adds to the clipped sum, drawn as :meth:`_release`
        draws it — the same calls on ``generator``, in ``like``'s shape, dtype and device, the
        same floats — as the release of a zero sum over ``L = 1`` (adding 0 and dividing by 1
        are exact). What a stand-in releasing otherwise draws (``clients/adversaries``) and
        what the server re-draws of a client's committed noise
        (:mod:`fedpriv.verification.committed`). TypeError for a non-additive mechanism (the
        vMF's release is no sum plus noise)."""
        if not self.additive:
            raise TypeError(f"mechanism {self.name!r} adds no noise to its clipped sum")
        import torch

        return self._release(torch.zeros_like(like), generator, 1.0)

    def canary_scores(
        self, design: CanaryDesign, pseudo_gradient: np.ndarray, *, batch_size: float,
        steps: int,
    ) -> np.ndarray | None:
        """Projections ``⟨u, d_j⟩`` of the de-normalised release ``u = L·(−Δ/η)`` on the
        canaries: a valid score for any release (privacy-math.md §10), the log-likelihood
        ratio's ranking for a release without noise (``clip``)."""
        from fedpriv.canaries import projections

        return projections(design, batch_size * pseudo_gradient)
