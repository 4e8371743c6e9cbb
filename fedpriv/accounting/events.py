"""What a client released, apart from how it is accounted (cf. dp-accounting's ``DpEvent``).

A :class:`Release` is one noisy release of a mechanism with the public parameter that governs
its privacy; a :class:`ReleaseEvent` is ``count`` Poisson-sampled such releases at rate
``sample_rate``. Accountants consume sequences of events; the audit store records them. The
neighbouring relation is add/remove-one-example throughout (record-level unit).

Parameters are in sensitivity units: ``noise_multiplier`` σ (Gaussian noise std over the ℓ2
bound), ``laplace_scale`` λ (Laplace scale over the ℓ1 bound), ``kappa`` κ (VMF; ``dim`` is the
dimension of the released vector).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from fedpriv.errors import InputError
from fedpriv.validate import check_dim, check_nonnegative, check_positive, number

__all__ = ["NEIGHBOURING_RELATION", "PARAMETER_KEYS", "Release", "ReleaseEvent"]

NEIGHBOURING_RELATION = "add/remove"
PARAMETER_KEYS: dict[str, str] = {
    "gaussian": "noise_multiplier",
    "laplace": "laplace_scale",
    "vmf": "kappa",
}
"""Mechanism name → the public parameter its privacy depends on."""

_NON_PRIVATE = ("none", "clip")


@dataclass(frozen=True)
class Release:
    """One unsubsampled noisy release.

    Attributes
    ----------
    mechanism
        ``"gaussian"``, ``"laplace"``, ``"vmf"``, or ``"none"`` / ``"clip"`` (no guarantee).
    parameter
        σ, λ or κ (see :data:`PARAMETER_KEYS`); ``None`` for ``none`` / ``clip``.
    dim
        Dimension of the released vector (VMF only).
    formal_guarantee
        False for ``none``, ``clip``, σ = 0, and VMF releasing the true norm (``vmf_keep_norm``).
    """

    mechanism: str
    parameter: float | None = None
    dim: int | None = None
    formal_guarantee: bool = True

    @classmethod
    def from_params(
        cls, mechanism: str, params: Mapping[str, Any], dim: int | None = None,
        key_prefix: str = "mechanism",
    ) -> Release:
        """Build from a mechanism name and its public parameters (``Mechanism.params()``)."""
        if mechanism in _NON_PRIVATE:
            return cls(mechanism, None, None, False)
        if mechanism not in PARAMETER_KEYS:
            allowed = ", ".join([*PARAMETER_KEYS, *_NON_PRIVATE])
            raise InputError(f"{key_prefix}.name", mechanism, f"one of {allowed}")
        key = PARAMETER_KEYS[mechanism]
        zero_ok = key == "noise_multiplier"  # σ = 0 is a valid (non-private) setting
        check = check_nonnegative if zero_ok else check_positive
        value = check(f"{key_prefix}.{key}", params.get(key))
        if mechanism != "vmf":
            return cls(mechanism, value, None, value > 0.0)
        keep_norm = bool(params.get("vmf_keep_norm", False))
        return cls(mechanism, value, check_dim(f"{key_prefix}.dim", dim, minimum=2), not keep_norm)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the audit store."""
        return asdict(self)


@dataclass(frozen=True)
class ReleaseEvent:
    """``count`` releases, each Poisson-sampled at rate ``sample_rate``."""

    release: Release
    sample_rate: float
    count: int

    def __post_init__(self) -> None:
        rate = number(self.sample_rate)
        if not 0.0 < rate <= 1.0:
            raise InputError("sample_rate", self.sample_rate, "a sampling rate in (0, 1]")
        count = number(self.count)
        if isinstance(self.count, bool) or not math.isfinite(count) or count < 1 or count % 1:
            raise InputError("steps", self.count, "an integer number of releases >= 1")
        object.__setattr__(self, "sample_rate", rate)  # normalise types; validated above
        object.__setattr__(self, "count", int(count))

    @property
    def step(self) -> tuple[Release, float]:
        """The per-release part ``(release, sample_rate)``: events sharing it compose by count."""
        return self.release, self.sample_rate

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the audit store."""
        return asdict(self)


