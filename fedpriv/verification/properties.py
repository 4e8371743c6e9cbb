"""Per-property verdicts of a client-round and the label they earn (issue 25 item 6).

A client-round's verdict is a tree of checks (:class:`~fedpriv.verification.verdict.Verdict`);
each check says which *properties* of the release it speaks to (``Verdict.speaks_to``, set where
the check is made: no table here names the tests). The checks today:

============== ====================================================== =========================
property       what it means                                          checks (``Verdict.test``)
============== ====================================================== =========================
noise-scale    at least the declared noise was added                  ``gaussian-norm``,
                                                                      ``laplace-norm`` (low
                                                                      side); ``vmf-kappa``;
                                                                      ``canaries`` (failure)
noise-law      the noise has the declared law (neither heavier nor    ``gaussian-shape``,
               lighter tails; bounded noise gives no DP at all)       ``gaussian-light-tail``,
                                                                      ``laplace-shape`` (also
                                                                      on the replayed residual)
fresh-noise    the noise is not shared with or cancelled by the       ``fresh-noise``,
               client's earlier releases                              ``replay``
signal-bound   the signal is within the clipping bound                ``…-norm`` (high side),
                                                                      ``clip-norm``,
                                                                      ``vmf-norm``
settings       the training settings are those the server sent        ``settings``
size-sampling  the local size and sampling rate are what they are     ``size-sampling``,
               accounted at                                           ``batch-sizes`` (failure)
identity       the reply comes from the client it claims to be        ``identity``
sensitivity    each record clipped to the declared C and used once    ``sensitivity`` (replay,
               per release, as the declared L: the release less its   simulation oracle only),
               replayed clipped signal is the declared noise          ``committed-noise``
============== ====================================================== =========================

(``step-freshness``, steps mode, speaks to ``fresh-noise``: a round's step noises against each
other. A passed ``committed-noise`` also settles noise-scale, noise-law, fresh-noise and
signal-bound: :data:`COMMITTED_SETTLES`.)

Each property is ``passed``, ``failed`` or ``not-tested`` (no check, a check that could not be
made, or a check whose power is not *useful*), with the reason and the power of its test.

**Useful power** (documented constants): ``noise-scale`` — noise at :data:`USEFUL_NOISE_FRACTION`
× declared or less is caught with probability :data:`~fedpriv.verification.power.DETECTION_POWER`
(:func:`~fedpriv.verification.power.gaussian_detectable_fraction`); ``signal-bound`` — a clipped
sum :data:`~fedpriv.verification.power.SIGNAL_FACTOR` × its bound is caught with that
probability; ``noise-law`` — both sides ran and were applicable (their own criteria:
variance-matched Laplace caught with power about ½ or more, bounded noise caught whatever the
signal); ``fresh-noise`` — the test ran (a client's first release passes vacuously: it has
no earlier release to share noise with); deterministic checks (settings, size, identity) are
useful when they ran.

``sensitivity`` — stated in ε (issue 42 item 3): less noise that would make the release's
true ε :data:`~fedpriv.verification.sensitivity.USEFUL_EPSILON_RATIO` (2) × the reported one
or more is caught with probability 0.99 (the replay's norm test at full power,
:func:`fedpriv.verification.sensitivity.detectable_ratios`, mapped through the run's
accountant), and so is a clipped signal scaled up that far (the smallest signal scaling
the projection on it catches, mapped the same way): both must be caught at 2 × for the power to
be useful. Where the committed noise was re-drawn exactly (``committed-noise``,
:mod:`fedpriv.verification.committed`) and the release is its signal plus that noise, the power
is useful whatever the ε-ratio: any deviation beyond the rounding bound is caught with
probability 1; and it settles :data:`COMMITTED_SETTLES` too, where their own tests had no
useful power (Laplace has no freshness test, its signal-bound test little power).

**The label** (:func:`label_of`). A client-round is *verified* when every ε-relevant property
(:func:`required_properties`) passed with useful power, ``sensitivity`` included (a replay:
simulation with the oracle only); *noise-verified* when every one did except ``sensitivity``,
which could not be tested — its reason says "per-record sensitivity assumed"; otherwise it is
*declared*, with the reasons (:func:`label_reasons`). A failed property is an inconsistent
round (the existing path: not aggregated, ε unbounded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from fedpriv.verification.power import DETECTION_POWER, SIGNAL_FACTOR
from fedpriv.verification.verdict import Verdict

__all__ = [
    "COMMITTED_SETTLES",
    "PROPERTIES",
    "USEFUL_NOISE_FRACTION",
    "PropertyVerdict",
    "label_of",
    "label_reasons",
    "labelled",
    "property_verdicts",
    "required_properties",
]

PROPERTIES = ("noise-scale", "noise-law", "fresh-noise", "signal-bound", "settings",
              "size-sampling", "identity", "sensitivity")
PropertyStatus = Literal["passed", "failed", "not-tested"]

COMMITTED_SETTLES = ("noise-scale", "noise-law", "fresh-noise", "signal-bound")
"""What a passed ``committed-noise`` check settles besides ``sensitivity``: the release is the
server's own clipped sum of the oracle's records plus the declared mechanism's own draw from
this client-round's stream, so the noise has the declared scale and law, is fresh (the stream
is keyed by the round) and the signal is within its bound (the server clipped it)."""

USEFUL_NOISE_FRACTION = 0.5
"""A noise-scale test is useful when it catches noise at this fraction of the declared noise
or less with probability ``DETECTION_POWER`` (0.99)."""


@dataclass(frozen=True, init=False)
class PropertyVerdict:
    """One property of one client-round: status, why, and its test's power (``None``: not
    stated); ``useful`` whether that power is useful (module docstring)."""

    name: str
    status: PropertyStatus
    reason: str
    power: str | None = None
    useful: bool = False
    epsilon_ratio: float | None = None  # sensitivity: the smallest ε-ratio caught (issue 42)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("PropertyVerdict sets its fields by hand (__init__): a subclass's own "
                        "fields would never be set")

    def __init__(self, name: str, status: PropertyStatus, reason: str, power: str | None = None,
                 useful: bool = False, epsilon_ratio: float | None = None) -> None:
        """The fields, in their order, set at once (as :class:`~fedpriv.verification.verdict.
        Verdict`'s: a reply's summary builds eight)."""
        object.__setattr__(self, "__dict__", {
            "name": name, "status": status, "reason": reason, "power": power, "useful": useful,
            "epsilon_ratio": epsilon_ratio})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``epsilon_ratio`` only where stated)."""
        out = {"status": self.status, "reason": self.reason, "power": self.power,
               "useful": self.useful}
        if self.epsilon_ratio is not None:
            out["epsilon_ratio"] = self.epsilon_ratio
        return out


def _leaves(verdict: Verdict) -> list[Verdict]:
    """The checks of a verdict tree, in order (a stack, not nested generators: per reply)."""
    out, stack = [], [verdict]
    while stack:
        node = stack.pop()
        if node.parts:
            stack.extend(reversed(node.parts))
        else:
            out.append(node)
    return out


def _norm_properties(v: Verdict) -> list[PropertyVerdict]:
    """A two-sided norm test's sides (``v.speaks_to``: low side first, high side second —
    noise-scale and signal-bound for every norm sandwich)."""
    s = v.statistic
    low_name, high_name = v.speaks_to
    fraction, signal = s.get("detectable_fraction"), s.get("signal_power")
    if v.status == "inconsistent":
        low = s.get("p_low", 0.0) <= s.get("p_high", 1.0)
        failed = PropertyVerdict(low_name if low else high_name, "failed", v.reason,
                                 useful=True)
        return [failed]
    if v.status != "consistent":
        return [PropertyVerdict(n, "not-tested", v.reason) for n in v.speaks_to]
    out = []
    if fraction is None:
        out.append(PropertyVerdict(low_name, "not-tested", "power not stated"))
    else:
        power, useful, low_power = _noise_power(fraction)
        out.append(PropertyVerdict(low_name, "passed" if useful else "not-tested",
                                   v.reason if useful else low_power, power, useful))
    if signal is None:
        out.append(PropertyVerdict(high_name, "not-tested", "power not stated"))
    else:
        power, useful, low_power = _signal_power(signal, math.copysign(1.0, signal))
        out.append(PropertyVerdict(high_name, "passed" if useful else "not-tested",
                                   v.reason if useful else low_power, power, useful))
    return out


@lru_cache(maxsize=1024)
def _noise_power(fraction: float) -> tuple[str, bool, str]:
    """A noise-scale test's power text, whether it is useful, and the reason it is not: one
    per detectable fraction (a function of the declaration: its replies share it), not one
    per reply; bounded, as fractions are numbers a client chooses."""
    power = (f"would catch noise below {fraction:.2f} × declared with probability "
             f"{DETECTION_POWER:g}" if fraction > 0 else
             f"would not catch even zero noise with probability {DETECTION_POWER:g} (a "
             "signal within the clipping bound C·B can make up the norm)")
    return (power, fraction >= USEFUL_NOISE_FRACTION,
            f"power too low to matter: {power} (useful: {USEFUL_NOISE_FRACTION:g} × declared)")


@lru_cache(maxsize=1024)
def _signal_power(signal: float, sign: float) -> tuple[str, bool, str]:
    """A signal-bound test's power text, whether it is useful, and the reason it is not: one
    per detection probability (a function of the declaration: its replies share it), not one
    per reply; ``sign`` (``signal``'s) keeps −0's text apart from 0's, which compare equal."""
    power = (f"would catch a clipped sum {SIGNAL_FACTOR:g} × its bound with probability "
             f"{signal:.3g}")
    return power, signal >= DETECTION_POWER, f"power too low to matter: {power}"


def _law_property(verdicts: list[Verdict]) -> PropertyVerdict:
    """The noise law from its sides: passed when every side a mechanism's check emits ran and
    was applicable (a side that could not be made is ``unverifiable``, never left out). A side
    tested twice — on the update and, under the oracle, on the replayed residual at full power
    (:func:`fedpriv.verification.sensitivity.residual_law_test`, same test name) — ran when
    either ran applicable."""
    failed = [v for v in verdicts if v.status == "inconsistent"]
    if failed:
        return PropertyVerdict("noise-law", "failed", failed[0].reason, useful=True)
    ran = {v.test for v in verdicts if v.status == "consistent"}
    verdicts = [v for v in verdicts if v.status == "consistent" or v.test not in ran]
    untested = [v for v in verdicts if v.status != "consistent"]
    sides = ", ".join(v.test for v in verdicts)
    if untested:
        why = "; ".join(f"{v.test}: {v.reason}" for v in untested)
        return PropertyVerdict("noise-law", "not-tested", why, f"sides run: {sides}")
    return PropertyVerdict("noise-law", "passed", "; ".join(v.reason for v in verdicts),
                           f"sides run: {sides}", True)


def _direct_property(name: str, verdicts: list[Verdict], untested: str) -> PropertyVerdict:
    if not verdicts:
        return PropertyVerdict(name, "not-tested", untested)
    for v in verdicts:  # the first failure (loops, not lists: four properties a reply)
        if v.status == "inconsistent":
            return PropertyVerdict(name, "failed", v.reason, useful=True)
    for v in verdicts:  # else the first pass
        if v.status == "consistent" and not v.refutes_only:
            return PropertyVerdict(name, "passed", v.reason, _level(v.alpha), True)
    reasons = "; ".join([v.reason for v in verdicts])
    return PropertyVerdict(name, "not-tested", reasons or untested)


def _level(alpha: float | None) -> str:
    """The power of a passed direct check: ``deterministic``, or its level (one text per α,
    not one per reply; −0 and 0, equal keys, print apart)."""
    return "deterministic" if alpha is None else _level_text(alpha, math.copysign(1.0, alpha))


@lru_cache(maxsize=64)
def _level_text(alpha: float, sign: float) -> str:
    return f"level {alpha:g}"


def _sensitivity_property(verdicts: list[Verdict]) -> PropertyVerdict:
    """The replay's verdict, its power stated in ε (module docstring)."""
    failed = [v for v in verdicts if v.status == "inconsistent"]
    if failed:
        return PropertyVerdict("sensitivity", "failed", failed[0].reason, useful=True)
    passed = [v for v in verdicts if v.status == "consistent" and v.test == "sensitivity"]
    if not passed:
        reasons = "; ".join(v.reason for v in verdicts) or "per-record sensitivity assumed"
        return PropertyVerdict("sensitivity", "not-tested", reasons)
    from fedpriv.verification.sensitivity import USEFUL_EPSILON_RATIO  # (after the cheap exits)

    ratio = passed[0].statistic.get("detectable_epsilon_ratio")
    exact = [v for v in verdicts if v.test == "committed-noise" and v.status == "consistent"]
    if ratio is None and not exact:
        return PropertyVerdict("sensitivity", "not-tested", "power not stated")
    stat = passed[0].statistic
    power = (f"would catch less noise that makes this release's ε "
             f"{math.inf if ratio is None else ratio:.3g} × the reported one, and a clipped "
             f"signal × {stat.get('detectable_signal_factor', math.inf):.3g}"
             f" (ε × {stat.get('signal_epsilon_ratio', math.inf):.3g}), with probability "
             f"{DETECTION_POWER:g}")
    # both deviations the replay tests count: less noise, and a larger signal than clipping to
    # C allows (the ×10 signal, a hidden step, no clipping push it so); either may make ε 2×
    useful = ratio is not None and max(
        ratio, stat.get("signal_epsilon_ratio", math.inf)) <= USEFUL_EPSILON_RATIO
    if exact:  # deterministic: less noise than declared leaves far more than the bound
        bound = exact[0].statistic.get("bound_in_noise", math.nan)
        power += (f"; the committed noise re-drawn exactly: any deviation beyond {bound:.2g} "
                  "noise stds caught with probability 1")
        useful = True
    return PropertyVerdict("sensitivity", "passed" if useful else "not-tested",
                           passed[0].reason if useful else f"power too low to matter: {power} "
                           f"(useful: ε × {USEFUL_EPSILON_RATIO:g})", power, useful,
                           None if ratio is None else float(ratio))


def property_verdicts(verdict: Verdict) -> dict[str, PropertyVerdict]:
    """Every property of :data:`PROPERTIES` for one client-round's verdict tree, read from the
    properties each check says it speaks to (:attr:`Verdict.speaks_to`): a check speaking to
    two is a two-sided norm test; one speaking to none is a check of the declaration itself,
    whose failure fails ``settings`` and whose ``unverifiable`` reason every untested
    property lists."""
    found: dict[str, list[Verdict]] = {name: [] for name in PROPERTIES}
    norms: list[Verdict] = []
    unmapped: list[str] = []
    for leaf in _leaves(verdict):
        if len(leaf.speaks_to) == 2:
            norms.append(leaf)
        elif leaf.speaks_to:
            found[leaf.speaks_to[0]].append(leaf)
        elif leaf.refutes_only:  # a bound that refuted nothing bears on no property
            continue
        elif leaf.status == "inconsistent":  # a precondition (declaration, optimiser) failed
            found["settings"].append(leaf)
        elif leaf.status in ("unverifiable", "undeclared"):
            unmapped.append(f"{leaf.test}: {leaf.reason}")
    untested = "; ".join(["no check of this property ran", *unmapped])
    sides = {prop.name: prop for v in norms for prop in _norm_properties(v)}  # the last wins
    out = {}
    for name in PROPERTIES:  # each property from the first of these that speaks to it
        if name == "sensitivity":
            out[name] = _sensitivity_property(found[name])
        elif name == "noise-law" and found[name]:
            out[name] = _law_property(found[name])
        elif name in sides:
            out[name] = sides[name]
        else:
            out[name] = _direct_property(name, found[name], untested)
    out.update({name: prop for name, prop in sides.items() if name not in out})
    exact = [v for v in found["sensitivity"]
             if v.test == "committed-noise" and v.status == "consistent"]
    for name in COMMITTED_SETTLES if exact else ():
        if out[name].status == "not-tested" or (out[name].status == "passed"
                                                and not out[name].useful):
            out[name] = PropertyVerdict(
                name, "passed", f"settled by the committed noise: {exact[0].reason}",
                "deterministic: any deviation beyond rounding caught with probability 1", True)
    return out


@lru_cache(maxsize=16)
def required_properties(unit: str = "record") -> tuple[str, ...]:
    """The ε-relevant properties: all of :data:`PROPERTIES`, except ``size-sampling`` at the
    client level (its ε against the server uses no sampling rate; the central ε uses the
    server's own client rate). One tuple per unit (asked twice per reply)."""
    return tuple(p for p in PROPERTIES if not (unit == "client" and p == "size-sampling"))


def label_reasons(properties: Mapping[str, PropertyVerdict], unit: str = "record") -> list[str]:
    """Why a client-round is not *verified*: each required property that did not pass with
    useful power (empty: *verified*); they do not depend on the verdict's status."""
    return labelled("consistent", properties, unit)[1]


def label_of(status: str, properties: Mapping[str, PropertyVerdict],
             unit: str = "record") -> str:
    """``verified``, ``noise-verified`` or ``declared`` (module docstring) of a client-round
    whose verdict has ``status``."""
    return labelled(status, properties, unit)[0]


def labelled(status: str, properties: Mapping[str, PropertyVerdict],
             unit: str = "record") -> tuple[str, list[str]]:
    """:func:`label_of` and :func:`label_reasons` together, the short properties found once
    (a reply's summary states both)."""
    short = [name for name in required_properties(unit)
             if properties[name].status != "passed" or not properties[name].useful]
    reasons = [f"{name}: {properties[name].status} ({properties[name].reason})"
               for name in short]
    if status != "consistent":
        return "declared", reasons
    if not short:
        return "verified", reasons
    if short == ["sensitivity"] and properties["sensitivity"].status == "not-tested":
        return "noise-verified", reasons
    return "declared", reasons
