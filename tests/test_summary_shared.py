"""What a reply's verdict and its summary share with other replies' (texts formatted once per
declaration: ``fedpriv/verification/properties.py``'s power texts, levels and required
properties; ``fedpriv/verification/verdict.py``'s prefixed statistic names) must give the very
summary computed afresh: on a batch that mixes declarations, mechanisms, cheats, an undeclared
reply and a replay, with crafted checks whose numbers the batch does not reach, every stored
summary is the one computed with every cache emptied just before it. The verdict classes' own
``__init__`` (fields set at once) must take their fields, in order, with their defaults."""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace

import numpy as np
import pytest
from test_verify_batch import ALPHA, F32, _batch, _sketches

from fedpriv.audit.records import to_json
from fedpriv.verification import Verdict, combine_verdicts, properties, verdict, with_preconditions
from strategies.reply_verdicts import verdict_summary
from strategies.stages.base import Round
from strategies.stages.verify import verify

CACHES = (properties._noise_power, properties._signal_power, properties._level_text,
          properties.required_properties, verdict._prefixed)


def _emptied() -> None:
    for cached in CACHES:
        cached.cache_clear()


def _norm(fraction: float, signal: float, alpha: float | None = ALPHA) -> Verdict:
    """A passed two-sided norm test stating its power, beside checks of the others, combined."""
    norm = Verdict("gaussian-norm", "consistent", f"norm at {fraction}", 0.5, ALPHA,
                   {"detectable_fraction": fraction, "signal_power": signal},
                   speaks_to=("noise-scale", "signal-bound"))
    others = [Verdict(name, "consistent", f"{name} checked", 1.0, alpha, {"x": 1.0},
                      speaks_to=(name,)) for name in ("settings", "size-sampling", "identity")]
    return combine_verdicts([norm], preconditions=others)


def _crafted() -> list[Verdict]:
    """Checks at numbers the batch does not reach: fractions either side of useful, signal
    powers at ±0 (equal keys, different texts), levels, two tests with one statistic layout."""
    out = [_norm(f, s, a) for f, s, a in [(0.5, 0.99, None), (0.49, 0.5, 1e-3), (0.0, 0.0, ALPHA),
                                          (0.7, -0.0, ALPHA), (-0.0, 1.0, 0.01)]]
    same = [Verdict(test, "consistent", test, 0.5, ALPHA, {"x": 2.0}, speaks_to=("noise-law",))
            for test in ("gaussian-shape", "laplace-shape")]
    return out + [with_preconditions(combine_verdicts([v]), same) for v in same]


@pytest.fixture(scope="module")
def verdicts() -> list[tuple[Verdict, str | None]]:
    """The mixed batch's verdicts (and the unit each is summarised at), and the crafted ones at
    both units."""
    theta = (F32(0.1) * np.random.default_rng(99).standard_normal(3_000, dtype=F32)).astype(F32)
    batch = _batch(theta)
    run = SimpleNamespace(audit=SimpleNamespace(verify_alpha=ALPHA), sketches=_sketches(batch))
    run.sketches_of = lambda dim: run.sketches
    verify(batch, Round(2, [theta], None, run))  # type: ignore[arg-type]
    out: list[tuple[Verdict, str | None]] = []
    for reply in batch:
        assert reply.verdict is not None
        out.append((reply.verdict, None if reply.report is None else reply.report.mechanism.level))
    return out + [(v, unit) for v in _crafted() for unit in ("record", "client")]


def test_shared_texts_give_the_summary_computed_afresh(
        verdicts: list[tuple[Verdict, str | None]]) -> None:
    warm = [to_json(verdict_summary(v, unit)) for v, unit in verdicts]
    assert len(set(warm)) > len(verdicts) // 2  # the batch is mixed
    for (v, unit), stored in reversed(list(zip(verdicts, warm, strict=True))):
        _emptied()
        assert to_json(verdict_summary(v, unit)) == stored


def test_shared_names_give_the_statistics_computed_afresh(
        verdicts: list[tuple[Verdict, str | None]]) -> None:
    """A combined verdict's statistic (its keys prefixed by cached names) is the one combined
    with every cache emptied, for every tree of the batch, in the other order."""
    warm = [combine_verdicts(list(v.parts or (v,))).statistic for v, _ in verdicts]
    for (v, _), stored in reversed(list(zip(verdicts, warm, strict=True))):
        _emptied()
        fresh = combine_verdicts(list(v.parts or (v,))).statistic
        assert list(fresh.items()) == list(stored.items())


@pytest.mark.parametrize("cls", [Verdict, properties.PropertyVerdict])
def test_the_fast_init_takes_the_fields_in_order_with_their_defaults(cls: type) -> None:
    """Verdict and PropertyVerdict set their fields at once in an ``__init__`` of their own (a
    reply builds a score of them): its parameters are the dataclass's fields, in order, with
    the same defaults (a default factory's stands as None), and an instance is what the
    fields say — a field added to one and not the other fails here."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in dataclasses.fields(cls)]
    for p, f in zip(params, dataclasses.fields(cls), strict=True):
        default = None if f.default_factory is not dataclasses.MISSING else f.default
        assert (p.default is inspect.Parameter.empty) == (default is dataclasses.MISSING), f.name
        if default is not dataclasses.MISSING:
            assert p.default == default, f.name
    made = cls(*[f"{f.name}!" for f in dataclasses.fields(cls)[:3]])
    assert vars(made) == {f.name: getattr(made, f.name) for f in dataclasses.fields(cls)}
    assert dataclasses.replace(made, status="changed").status == "changed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.status = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("cls", [Verdict, properties.PropertyVerdict])
def test_a_subclass_is_refused(cls: type) -> None:
    """The hand-written ``__init__`` would never set a subclass's own fields."""
    with pytest.raises(TypeError, match="sets its fields by hand"):
        type("Sub", (cls,), {})


def test_a_verdicts_numbers_are_read_only_and_travel_as_a_dict() -> None:
    """A verdict is shared between replies: its statistic refuses writes, copies the mapping it
    was given (its owner cannot change it afterwards), and still pickles, deep-copies, goes
    through ``dataclasses.asdict`` and JSON as a dict."""
    import copy
    import json
    import pickle

    given = {"z": 1.5}
    made = Verdict("t", "consistent", "r", statistic=given, parts=(Verdict("u", "consistent",
                                                                          "s"),))
    given["z"] = 9.0
    assert made.statistic == {"z": 1.5}
    for write in (lambda s: s.__setitem__("z", 2.0), lambda s: s.update(z=2.0),
                  lambda s: s.pop("z"), lambda s: s.clear(), lambda s: s.setdefault("y", 1.0)):
        with pytest.raises(TypeError, match="read-only"):
            write(made.statistic)
    for copied in (pickle.loads(pickle.dumps(made)), copy.deepcopy(made)):
        assert copied == made and type(copied.statistic) is type(made.statistic)
    assert dataclasses.asdict(made)["statistic"] == {"z": 1.5}
    assert json.loads(json.dumps(made.statistic)) == {"z": 1.5}


def test_the_level_of_minus_zero_is_its_own() -> None:
    properties._level_text.cache_clear()
    assert properties._level(0.0) == "level 0"
    assert properties._level(-0.0) == "level -0"
