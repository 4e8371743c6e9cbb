"""Mechanism specs ``MECH:PARAM=V[,..]`` for ``fedpriv compare``, each naming a trade-off function.

Accepted forms (``μ = sensitivity / noise scale``)::

    gaussian:mu=M | gaussian:sigma=S             one Gaussian release, μ = 1/σ
    laplace:mu=M | laplace:scale=B               one Laplace release, μ = 1/λ
    vmf:kappa=K,dim=P                            one VMF release on S^{P−1}
    subsampled-gaussian:sigma=S,q=Q,steps=T      Poisson rate Q, T releases (PLD)
    subsampled-laplace:scale=B,q=Q,steps=T       Poisson rate Q, T releases (PLD)
    subsampled-vmf:kappa=K,dim=P,q=Q,steps=T     Poisson rate Q, T releases (PLD)
    pp | bnp                                     perfect privacy / blatant non-privacy

A bad spec raises :class:`InputError` naming the flag it came from (``--a``/``--b``) and the
accepted form, before any computation starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from fedpriv.errors import InputError
from fedpriv.leakage import tradeoff as tf

__all__ = ["SPEC_FORMS", "MechanismSpec", "parse_spec"]

Tradeoff = Callable[[np.ndarray], np.ndarray]


def _profile_tradeoff(kind: str, params: Mapping[str, float]) -> Tradeoff:
    from fedpriv.leakage import profiles

    p = dict(params)
    build = {
        "gaussian": lambda: profiles.subsampled_gaussian_profile(p["sigma"], p["q"], p["steps"]),
        "laplace": lambda: profiles.subsampled_laplace_profile(p["scale"], p["q"], p["steps"]),
        "vmf": lambda: profiles.subsampled_vmf_profile(p["kappa"], p["dim"], p["q"], p["steps"]),
    }
    return build[kind]().tradeoff


@dataclass(frozen=True)
class _Form:
    usage: str
    options: tuple[frozenset[str], ...]  # the accepted parameter sets
    build: Callable[[Mapping[str, float]], Tradeoff]


SPEC_FORMS: dict[str, _Form] = {
    "gaussian": _Form(
        "gaussian:mu=M (M >= 0) or gaussian:sigma=S (S > 0)",
        (frozenset({"mu"}), frozenset({"sigma"})),
        lambda p: partial(tf.gaussian_tradeoff, mu=p["mu"] if "mu" in p else 1.0 / p["sigma"]),
    ),
    "laplace": _Form(
        "laplace:mu=M (M >= 0) or laplace:scale=B (B > 0)",
        (frozenset({"mu"}), frozenset({"scale"})),
        lambda p: partial(tf.laplace_tradeoff, mu=p["mu"] if "mu" in p else 1.0 / p["scale"]),
    ),
    "vmf": _Form(
        "vmf:kappa=K,dim=P (K > 0, integer P >= 2)",
        (frozenset({"kappa", "dim"}),),
        lambda p: partial(tf.vmf_tradeoff, kappa=p["kappa"], dim=int(p["dim"])),
    ),
    "subsampled-gaussian": _Form(
        "subsampled-gaussian:sigma=S,q=Q,steps=T (S > 0, 0 < Q <= 1, integer T >= 1)",
        (frozenset({"sigma", "q", "steps"}),),
        partial(_profile_tradeoff, "gaussian"),
    ),
    "subsampled-laplace": _Form(
        "subsampled-laplace:scale=B,q=Q,steps=T (B > 0, 0 < Q <= 1, integer T >= 1)",
        (frozenset({"scale", "q", "steps"}),),
        partial(_profile_tradeoff, "laplace"),
    ),
    "subsampled-vmf": _Form(
        "subsampled-vmf:kappa=K,dim=P,q=Q,steps=T (K > 0, integer P >= 2, 0 < Q <= 1, "
        "integer T >= 1)",
        (frozenset({"kappa", "dim", "q", "steps"}),),
        partial(_profile_tradeoff, "vmf"),
    ),
    "pp": _Form(
        "pp (perfect privacy, no parameters)", (frozenset(),), lambda p: tf.perfect_privacy_tradeoff
    ),
    "bnp": _Form(
        "bnp (blatant non-privacy, no parameters)",
        (frozenset(),),
        lambda p: tf.blatant_non_privacy_tradeoff,
    ),
}

# parameter -> (valid?, what is allowed)
_CHECKS: dict[str, tuple[Callable[[float], bool], str]] = {
    "mu": (lambda v: 0 <= v < math.inf, "a number >= 0"),
    "sigma": (lambda v: 0 < v < math.inf, "a number > 0"),
    "scale": (lambda v: 0 < v < math.inf, "a number > 0"),
    "kappa": (lambda v: 0 < v < math.inf, "a number > 0"),
    "q": (lambda v: 0 < v <= 1, "a sampling rate in (0, 1]"),
    "steps": (lambda v: 1 <= v < math.inf and v == int(v), "an integer >= 1"),
    "dim": (lambda v: 2 <= v < math.inf and v == int(v), "an integer >= 2"),
}
_INTEGER_PARAMS = frozenset({"steps", "dim"})


@dataclass(frozen=True)
class MechanismSpec:
    """A parsed spec: the mechanism's name and its parameters."""

    text: str
    name: str
    params: tuple[tuple[str, float], ...]

    def tradeoff(self) -> Tradeoff:
        """The spec's trade-off function ``alpha -> f(alpha)`` (PLD specs compute their profile)."""
        return SPEC_FORMS[self.name].build(dict(self.params))

    def describe(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {"spec": self.text, "mechanism": self.name, "params": dict(self.params)}

    def label(self) -> str:
        """Short human label, e.g. ``gaussian (mu=1)``."""
        inner = ", ".join(f"{k}={v:g}" for k, v in self.params)
        return f"{self.name} ({inner})" if inner else self.name


def _parse_params(body: str, key: str, text: str, form: _Form) -> dict[str, float]:
    params: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        name, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or name in params:
            raise InputError(key, text, f"PARAM=VALUE pairs, each once: {form.usage}")
        try:
            params[name] = float(raw)
        except ValueError:
            raise InputError(key, text, f"a number for {name!r}: {form.usage}") from None
    return params


def parse_spec(text: str, key: str) -> MechanismSpec:
    """Parse ``MECH[:PARAM=V[,..]]``; ``key`` (``"--a"``/``"--b"``) is named in any error."""
    name, _, body = str(text).strip().partition(":")
    name = name.strip().lower()
    form = SPEC_FORMS.get(name)
    if form is None:
        usage = "; ".join(f.usage for f in SPEC_FORMS.values())
        raise InputError(key, text, f"MECH:PARAM=V[,..], one of: {usage}")
    params = _parse_params(body, key, text, form)
    if frozenset(params) not in form.options:
        raise InputError(key, text, form.usage)
    for param, value in params.items():
        valid, allowed = _CHECKS[param]
        if not valid(value):
            raise InputError(key, text, f"{param} {allowed}: {form.usage}")
        if param in _INTEGER_PARAMS:
            params[param] = int(value)
    return MechanismSpec(text=str(text), name=name, params=tuple(sorted(params.items())))
