"""Mechanism specs ``MECH:PARAM=V[,..]`` for ``fedpriv compare``, each naming a trade-off function.

The forms come from the mechanism registry: for every mechanism with a formal guarantee
(:func:`fedpriv.mechanisms.accountable`), ``MECH:...`` is one release and
``subsampled-MECH:...,q=Q,steps=T`` is that release Poisson-sampled at rate ``Q`` and composed
``T`` times (through its PLD). The parameters are the fields of the mechanism's release class
(``noise_multiplier``, ``laplace_scale``, ``kappa``, ``dim``), or their short names
(``sigma``, ``scale``); ``mu=M`` — the sensitivity over the noise scale, ``μ = 1/parameter`` —
is accepted by every release whose parameter is a noise scale (``mu=0``: perfect privacy).
``pp`` and ``bnp`` are perfect privacy and blatant non-privacy. For example::

    gaussian:mu=1 | gaussian:sigma=1 | laplace:scale=2 | vmf:kappa=100,dim=13700
    subsampled-gaussian:sigma=1,q=0.01,steps=1000

A bad spec raises :class:`InputError` naming the flag it came from (``--a``/``--b``) and the
accepted form, before any computation starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedpriv.errors import InputError
from fedpriv.leakage import tradeoff as tf
from fedpriv.mechanisms.registry import accountable, release_class
from fedpriv.validate import check_dim, check_nonnegative, check_rate

__all__ = ["MechanismSpec", "parse_spec", "spec_forms"]

Tradeoff = Callable[[np.ndarray], np.ndarray]
_SUBSAMPLED = "subsampled-"
_FIXED: dict[str, tuple[str, Tradeoff]] = {
    "pp": ("pp (perfect privacy, no parameters)", tf.perfect_privacy_tradeoff),
    "bnp": ("bnp (blatant non-privacy, no parameters)", tf.blatant_non_privacy_tradeoff),
}


def _release_type(name: str) -> type | None:
    return release_class(name) if name in accountable() else None


def _field_names(release_type: type) -> list[str]:
    return [f.name for f in dataclasses.fields(release_type)]


def _usage(name: str) -> str:
    if name in _FIXED:
        return _FIXED[name][0]
    subsampled = name.startswith(_SUBSAMPLED)
    release_type = _release_type(name.removeprefix(_SUBSAMPLED))
    short = {v: k for k, v in release_type.spec_names.items()}
    parts = [f"{short.get(f, f)}=V" for f in _field_names(release_type)]
    if subsampled:
        return f"{name}:{','.join([*parts, 'q=Q', 'steps=T'])}"
    form = f"{name}:{','.join(parts)}"
    return f"{name}:mu=M or {form}" if release_type.more_noise > 0 else form


def spec_forms() -> dict[str, str]:
    """Every accepted spec name → its usage."""
    names = [*accountable(), *(_SUBSAMPLED + n for n in accountable()), *_FIXED]
    return {name: _usage(name) for name in names}


@dataclass(frozen=True)
class MechanismSpec:
    """A parsed spec: the mechanism's name and its parameters."""

    text: str
    name: str
    params: tuple[tuple[str, float], ...]

    def release(self) -> Any:
        """The single release the spec names (None for ``pp``/``bnp`` and ``mu=0``)."""
        release_type = _release_type(self.name.removeprefix(_SUBSAMPLED))
        if release_type is None:
            return None
        params = {release_type.spec_names.get(k, k): v for k, v in self.params}
        own = release_type.parameter_name
        if "mu" in params:
            mu = params.pop("mu")
            if mu == 0.0:
                return None
            params[own] = 1.0 / mu
        params.pop("q", None)
        params.pop("steps", None)
        return release_type(**params)

    def tradeoff(self) -> Tradeoff:
        """The spec's trade-off function ``alpha -> f(alpha)`` (subsampled specs compute their
        privacy profile)."""
        if self.name in _FIXED:
            return _FIXED[self.name][1]
        release = self.release()
        if release is None:  # mu = 0
            return tf.perfect_privacy_tradeoff
        if not self.name.startswith(_SUBSAMPLED):
            return release.tradeoff
        from fedpriv.leakage.profiles import subsampled_profile

        p = dict(self.params)
        return subsampled_profile(release, p["q"], int(p["steps"])).tradeoff

    def describe(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"spec": self.text, "mechanism": self.name, "params": dict(self.params)}

    def label(self) -> str:
        """Short human label, e.g. ``gaussian (mu=1)``."""
        inner = ", ".join(f"{k}={v:g}" for k, v in self.params)
        return f"{self.name} ({inner})" if inner else self.name


def _parse_params(body: str, key: str, text: str, usage: str) -> dict[str, float]:
    params: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        name, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or name in params:
            raise InputError(key, text, f"PARAM=VALUE pairs, each once: {usage}")
        try:
            params[name] = float(raw)
        except ValueError:
            raise InputError(key, text, f"a number for {name!r}: {usage}") from None
    return params


def _normalise(release_type: type, params: dict[str, float], subsampled: bool, key: str,
               text: str, usage: str) -> None:
    """Check the parameter set is complete (short names mapped to field names) and the values
    of ``mu``, ``q`` and ``steps`` in range (the release class validates its own fields)."""
    out = {release_type.spec_names.get(k, k): v for k, v in params.items()}
    expected = set(_field_names(release_type)) | ({"q", "steps"} if subsampled else set())
    given = set(out)
    own = release_type.parameter_name
    if "mu" in given and release_type.more_noise > 0 and own not in given:
        given = (given - {"mu"}) | {own}
    if given != expected or (subsampled and out.get("mu") == 0.0):
        raise InputError(key, text, usage)
    checks = {"mu": check_nonnegative, "q": check_rate, "steps": check_dim}
    for name, value in out.items():
        try:
            checks.get(name, lambda k, v: v)(name, value)
        except InputError as exc:
            raise InputError(key, text, f"{name} {exc.allowed}: {usage}") from None


def parse_spec(text: str, key: str) -> MechanismSpec:
    """Parse ``MECH[:PARAM=V[,..]]``; ``key`` (``"--a"``/``"--b"``) is named in any error."""
    name, _, body = str(text).strip().partition(":")
    name = name.strip().lower()
    base = name.removeprefix(_SUBSAMPLED)
    if name not in _FIXED and _release_type(base) is None:
        forms = "; ".join(spec_forms().values())
        raise InputError(key, text, f"MECH:PARAM=V[,..], one of: {forms}")
    usage = _usage(name)
    params = _parse_params(body, key, text, usage)
    if name in _FIXED:
        if params:
            raise InputError(key, text, usage)
        return MechanismSpec(text=str(text), name=name, params=())
    release_type = _release_type(base)
    _normalise(release_type, params, name != base, key, text, usage)
    params = {k: int(v) if k in ("steps", "dim") else v for k, v in params.items()}
    spec = MechanismSpec(text=str(text), name=name, params=tuple(sorted(params.items())))
    try:
        spec.release()
    except InputError as exc:
        raise InputError(key, text, f"{exc.key} {exc.allowed}: {usage}") from None
    return spec
