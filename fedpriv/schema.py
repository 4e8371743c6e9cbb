"""The configuration schema engine: sections as frozen dataclasses, checked key by key.

A section is a frozen dataclass whose every field declares its type and, through :func:`rule`,
what values are allowed. :func:`build_section` validates a raw mapping (a TOML table, or the
JSON the server ships to its clients) against it — unknown keys, wrong types, NaN and ±∞,
values out of range — and raises :class:`~fedpriv.errors.InputError` naming the dotted key,
the value and what is allowed. A section class with a ``from_raw(raw, prefix)`` classmethod
validates itself (for tables whose keys are not fixed fields, such as ``[mechanism]``).

:func:`parse_override` and :func:`apply_override` turn ``--set KEY=VALUE`` into a nested
mapping; :func:`read_toml` reads a preset. A document nested deeper than :data:`MAX_DEPTH`
(tables in arrays in tables ...) is refused by :func:`check_depth`, as is one too deep for the
TOML parser itself (Python's ``tomllib`` parses nesting by recursion). The sections themselves
live beside the components that read them; :mod:`fedpriv.config` assembles them into the run's
configuration.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedpriv.errors import InputError

__all__ = [
    "Check",
    "Entry",
    "MAX_DEPTH",
    "MAX_SEED",
    "apply_override",
    "build_field",
    "build_list",
    "build_section",
    "bounded_count",
    "check_depth",
    "distinct_positive",
    "default_text",
    "drop_none",
    "field_entries",
    "finite",
    "one_of",
    "parse_override",
    "positive",
    "read_toml",
    "rule",
    "section_entries",
    "seed_ok",
    "type_name",
    "type_ok",
]

Check = Callable[[Any], bool]

#: Seeds go to ``torch.manual_seed`` and SQLite INTEGER columns: 63 bits at most.
MAX_SEED = 2**63 - 1

#: Deepest nesting of tables and arrays a document may have: the deepest key of the run's
#: config is ``mechanism.overrides[i].clip_per_layer[j]`` (depth 5); the checks, the JSON the
#: server ships and the messages that print a value all walk the document by recursion.
MAX_DEPTH = 32
_TOO_DEEP = f"at most {MAX_DEPTH} levels of nested tables and arrays"


def rule(allowed: str, check: Check | None = None, *, doc: str = "", **kwargs: Any) -> Any:
    """A dataclass field whose value must satisfy ``check``; ``allowed`` says what is allowed,
    ``doc`` what the key does (one sentence, for the config reference) where ``allowed`` does
    not already say it."""
    return field(metadata={"allowed": allowed, "check": check, "doc": doc}, **kwargs)


def positive(v: Any) -> bool:
    """Whether ``v > 0``."""
    return bool(v > 0)


def seed_ok(v: Any) -> bool:
    """Whether ``v`` is a seed in ``[0, MAX_SEED]``."""
    return bool(0 <= v <= MAX_SEED)


def bounded_count(low: int, high: int, what: str = "") -> tuple[str, Check]:
    """An integer in ``[low, high]``: every count has a ceiling, so a typo cannot start a run
    without end or exhaust memory. Returns ``(allowed, check)`` for :func:`rule`."""
    return f"an integer in [{low:,}, {high:,}]{what}", lambda v: low <= v <= high


def one_of(*choices: str) -> tuple[str, Check]:
    """One of ``choices``: ``(allowed, check)`` for :func:`rule`."""
    return f"one of {list(choices)}", lambda v: v in choices


def distinct_positive(values: list[float]) -> bool:
    """Whether ``values`` are distinct finite numbers > 0."""
    return len(set(values)) == len(values) and all(math.isfinite(v) and v > 0 for v in values)


def drop_none(obj: Any) -> Any:
    """``obj`` (nested dicts and lists) without the ``None`` values of its dicts (TOML has no
    null)."""
    if isinstance(obj, dict):
        return {k: drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [drop_none(v) for v in obj]
    return obj


def type_ok(value: Any, annotation: Any) -> bool:
    """Whether ``value`` (from TOML/JSON) fits the field annotation."""
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        return any(type_ok(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return isinstance(value, list) and all(type_ok(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    raise TypeError(f"unsupported annotation {annotation!r}")


def finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (a number or a list of them)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return all(finite(v) for v in value) if isinstance(value, list) else True


def type_name(annotation: Any) -> str:
    """The type of a field annotation in words (``a number``, ``a list``, ...)."""
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        parts = [type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(parts)
    if origin in (list, tuple):
        return "a list"
    if origin is dict:
        return "a table"
    return names.get(annotation, str(annotation))


@dataclass(frozen=True)
class Entry:
    """One key of the config reference: its dotted key (``[i]`` for an element of an array of
    tables: ``strategy.nodes[i].client``), type, default and what is allowed, in words, and
    what it does (empty where ``allowed`` says it)."""

    key: str
    type: str
    default: str
    allowed: str
    doc: str = ""


def default_text(value: Any) -> str:
    """A default as the reference shows it: TOML's spelling, ``unset`` for None."""
    return "unset" if value is None else json.dumps(list(value) if isinstance(value, tuple)
                                                    else value)


def _field_default(f: dataclasses.Field) -> Any:
    """The default of the dataclass field ``f`` (its factory's value, if it has one)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def section_entries(cls: type, prefix: str) -> list[Entry]:
    """Every key of the section dataclass ``cls``, nested sections and arrays of tables
    included, named ``f"{prefix}<key>"``; a class with ``reference(prefix)`` lists its own."""
    reference = getattr(cls, "reference", None)
    return reference(prefix) if reference is not None else field_entries(cls, prefix)


def field_entries(cls: type, prefix: str, skip: tuple[str, ...] = ()) -> list[Entry]:
    """The entries of the fields of ``cls`` but ``skip`` (:func:`section_entries`)."""
    out: list[Entry] = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        key, annotation = f"{prefix}{f.name}", _hints(cls)[f.name]
        item = (typing.get_args(annotation) or [None])[0]
        if hasattr(annotation, "from_raw") or dataclasses.is_dataclass(annotation):
            out += section_entries(annotation, f"{key}.")
        elif typing.get_origin(annotation) is list and dataclasses.is_dataclass(item):
            out += section_entries(item, f"{key}[i].")
        else:
            out.append(Entry(key, type_name(annotation), default_text(_field_default(f)),
                             f.metadata.get("allowed", ""), f.metadata.get("doc", "")))
    return out


def build_section(cls: type, raw: Mapping[str, Any], prefix: str) -> Any:
    """Validate ``raw`` against the section dataclass ``cls`` (errors name ``f"{prefix}<key>"``);
    recurse into nested sections and lists of them; a class with ``from_raw`` validates
    itself."""
    if not isinstance(raw, Mapping):
        raise InputError(prefix.rstrip("."), raw, "a table")
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        key = unknown[0]
        raise InputError(f"{prefix}{key}", raw[key], f"a known key: one of {sorted(fields)}")
    return cls(**{name: build_field(cls, name, value, prefix) for name, value in raw.items()})


def build_field(cls: type, name: str, value: Any, prefix: str) -> Any:
    """Validate ``value`` as the field ``name`` of the section dataclass ``cls`` (errors name
    ``f"{prefix}{name}"``)."""
    key, annotation = f"{prefix}{name}", _hints(cls)[name]
    item = (typing.get_args(annotation) or [None])[0]
    if hasattr(annotation, "from_raw"):
        return annotation.from_raw(value, f"{key}.")
    if dataclasses.is_dataclass(annotation):
        return build_section(annotation, value, f"{key}.")
    if typing.get_origin(annotation) is list and dataclasses.is_dataclass(item):
        return build_list(item, value, key)
    meta = next(f.metadata for f in dataclasses.fields(cls) if f.name == name)
    return _leaf(key, value, annotation, meta)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved field annotations of ``cls`` (once per class: resolving is slow)."""
    return typing.get_type_hints(cls)


def build_list(cls: type, raw: Any, key: str) -> list[Any]:
    """Validate an array of tables (``[[key]]``) against the section dataclass ``cls``."""
    if not isinstance(raw, list):
        raise InputError(key, raw, "a list of tables")
    return [build_section(cls, v, f"{key}[{i}].") for i, v in enumerate(raw)]


def _leaf(key: str, value: Any, annotation: Any, meta: Mapping[str, Any]) -> Any:
    """One plain value checked against its type and its rule."""
    if not type_ok(value, annotation):
        raise InputError(key, value, f"{type_name(annotation)}: {meta['allowed']}")
    if not finite(value):
        raise InputError(key, value, f"finite numbers: {meta['allowed']}")
    if annotation is float or float in typing.get_args(annotation):
        value = float(value) if isinstance(value, int) else value
    if value is not None and meta["check"] is not None and not meta["check"](value):
        raise InputError(key, value, meta["allowed"])
    return value


def check_depth(raw: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH` (walked without recursion).

    Raises
    ------
    InputError
        Named by the top-level key whose value is too deep.
    """
    for key, value in raw.items():
        stack = [(value, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise InputError(f"{prefix}{key}", value, _TOO_DEEP)
            children = node.values() if isinstance(node, Mapping) else (
                node if isinstance(node, list) else ())
            stack.extend((child, depth + 1) for child in children)


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``KEY=VALUE``; the value is read as TOML (``0.1``, ``true``, ``[0, 1]``, ``"s"``)
    and as a bare string if it is not valid TOML (so ``data.name=mnist`` works)."""
    key, sep, raw = text.partition("=")
    key = key.strip().strip('"')
    if not sep or not all(key.split(".")):  # no empty key, section or leaf
        raise InputError("--set", text, "KEY=VALUE, e.g. train.lr=0.1")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    except RecursionError:  # tomllib parses nested arrays and inline tables by recursion
        raise InputError("--set", text, f"a value of {_TOO_DEEP}") from None
    return key, value


def apply_override(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted ``key`` in the nested dict ``raw`` (creating sections as needed)."""
    *sections, leaf = key.split(".")
    node = raw
    for i, section in enumerate(sections):
        child = node.setdefault(section, {})
        if not isinstance(child, dict):
            raise InputError(".".join(sections[: i + 1]), child, "a table, not a value")
        node = child
    node[leaf] = value


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed TOML document at ``path``.

    Raises
    ------
    InputError
        Named ``CONFIG``, for a missing or unreadable file, a TOML syntax error, or nesting
        too deep for the parser.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("CONFIG", str(p), "an existing TOML file")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError("CONFIG", str(p), f"valid TOML ({exc})") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables by recursion
        raise InputError("CONFIG", str(p), f"TOML of {_TOO_DEEP}") from None
