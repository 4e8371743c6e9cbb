"""The config loader refuses bad input cleanly: only success or InputError, whatever it reads.

Hypothesis builds random documents — nested tables of known and unknown keys holding values of
every TOML type (including nan, ±inf, huge integers, dates, empty and mixed lists) — and feeds
them to :func:`workflows.config.config_from_dict`, to :func:`workflows.config.load_config` as TOML
files (serialised with ``tomli_w``), as random bytes, and as random ``--set`` overrides.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import string

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedpriv.config import section_names
from fedpriv.errors import InputError
from workflows.config import Config, config_from_dict, load_config

SECTIONS = section_names()  # the library's keys and every section the application registers
KNOWN = {
    name: [f.name for f in dataclasses.fields(cls)]
    for name, cls in ((name, getattr(Config(), name)) for name in SECTIONS)
    if dataclasses.is_dataclass(cls)
}
TOP_SCALARS = [name for name in SECTIONS if name not in KNOWN]

scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1e-300, 0.5, 1.0, 1.5, 100.0]),
    st.text(max_size=12),
    st.sampled_from(["all", "gaussian", "vmf", "digits", "mnist", "iid", "poisson", "rdp"]),
    st.dates(),
    st.datetimes(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8,
)
key_text = st.text(alphabet=string.ascii_letters + "_-. ", min_size=1, max_size=10)


@st.composite
def documents(draw: st.DrawFn) -> dict:
    """A config-shaped dict: mostly known sections and keys, sometimes unknown ones."""
    doc: dict = {}
    for name in draw(st.lists(st.sampled_from(TOP_SCALARS), max_size=2, unique=True)):
        doc[name] = draw(scalars)
    for section in draw(st.lists(st.sampled_from(sorted(KNOWN)), max_size=4, unique=True)):
        keys = draw(st.lists(st.sampled_from(KNOWN[section]) | key_text, max_size=4, unique=True))
        doc[section] = {k: draw(values) for k in keys}
        if section == "mechanism" and draw(st.booleans()):
            doc[section]["overrides"] = draw(_overrides())
    if draw(st.booleans()):
        doc[draw(key_text)] = draw(values)
    return doc


@st.composite
def _overrides(draw: st.DrawFn) -> list:
    table = st.fixed_dictionaries(
        {"clients": st.lists(st.integers(-2, 12), max_size=3) | values},
        optional={k: values for k in KNOWN["mechanism"]},
    )
    return draw(st.lists(table, max_size=2))


def _only_input_error(call, *args) -> None:  # noqa: ANN001
    try:
        cfg = call(*args)
    except InputError as exc:
        assert exc.key and "expected" in str(exc)
        return
    assert Config.from_json(cfg.to_json()) == cfg  # what validates also round-trips
    assert all(
        math.isfinite(v) for v in _floats(cfg.to_dict())
    ), "a non-finite number passed validation"


def _floats(tree: object) -> list[float]:
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _floats(v)]
    if isinstance(tree, list):
        return [x for v in tree for x in _floats(v)]
    return [tree] if isinstance(tree, float) else []


FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(documents())
def test_random_documents_validate_or_raise_input_error(doc: dict) -> None:
    _only_input_error(config_from_dict, doc)


@FUZZ
@given(documents())
def test_random_toml_files_validate_or_raise_input_error(tmp_path_factory, doc: dict) -> None:
    path = tmp_path_factory.mktemp("toml") / "c.toml"
    try:
        path.write_text(tomli_w.dumps(doc), encoding="utf-8")
    except (TypeError, ValueError):  # not representable in TOML (e.g. a None inside a list)
        return
    _only_input_error(load_config, path)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_random_bytes_are_refused_cleanly(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("bytes") / "c.toml"
    path.write_bytes(data)
    _only_input_error(load_config, path)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.text(max_size=30) | st.builds(
    "{}={}".format, st.sampled_from([f"{s}.{k}" for s in KNOWN for k in KNOWN[s]] + TOP_SCALARS)
    | key_text, st.text(max_size=15)), max_size=4))
def test_random_set_overrides_validate_or_raise_input_error(overrides: list[str]) -> None:
    _only_input_error(load_config, None, overrides)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("train.lr=inf", "train.lr"),
        ("train.lr=nan", "train.lr"),
        ("mechanism.clip=inf", "mechanism.clip"),
        ("mechanism.noise_multiplier=inf", "mechanism.noise_multiplier"),
        ("mechanism.clip_per_layer=[1.0, inf, 1.0]", "mechanism.clip_per_layer"),
        ("mechanism.clip_per_layer=[]", "mechanism.clip_per_layer"),
        ("data.dirichlet_alpha=inf", "data.dirichlet_alpha"),
        ("seed=-1", "seed"),
        (f"seed={2**64}", "seed"),
        (f"audit.seed={2**64}", "audit.seed"),
        ("train.fraction_train=0", "train.fraction_train"),
        ("audit.delta=0", "audit.delta"),
        ("data.num_clients=0", "data.num_clients"),
        ("audit.clients=0", "audit.clients"),
        ("audit.clients=[0, 99]", "audit.clients"),
        ("simulation.client_cpus=0", "simulation.client_cpus"),
        ("train.when=2024-01-01", "train.when"),
        ("train.lr=2024-01-01", "train.lr"),
    ],
)
def test_out_of_range_values_name_the_key(override: str, key: str) -> None:
    with pytest.raises(InputError) as err:
        load_config(None, [override])
    assert err.value.key == key


def test_a_date_value_is_refused_not_crashed() -> None:
    with pytest.raises(InputError, match="rounds"):
        config_from_dict({"rounds": dt.date(2024, 1, 1)})
