"""Every number a reply carries is bounded where the server reads it (issue 42, item 5): a value
outside its field's domain is that client's ``malformed`` failure, naming the field, and the run
completes with the other clients aggregated.

Before: a stock reply's ``num-examples`` of 10¹⁹ (anything ≥ 2⁶³) reached the audit store and
ended the run with ``OverflowError: Python int too large to convert to SQLite INTEGER``; a report
field holding an integer beyond the floats (``batch-size = 10⁴⁰⁰``) or JSON nested deeper than
the parser goes failed with the exception's text instead of the field's name; a float
``protocol-version`` of 1.0 passed as version 1.

The property test drives extreme integers, floats, strings and nested values through every field
of a fedpriv reply (the report and its metrics) and of a stock Flower reply (its metrics), in the
real server body (:func:`strategies.server_run.run_federation` on the in-process
:class:`~reliability_support.LocalGrid`).
"""

from __future__ import annotations

import json
import math

import pytest
from flwr.app import Message
from flwr.clientapp import ClientApp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import QUICKSTART, LocalGrid, mixed_client_app, run_on_ray

from fedpriv.mechanisms import build_mechanism
from fedpriv.protocol import (
    ClientReport,
    GroundTruthOracle,
    ReplyError,
    finite_number,
)
from strategies.server_run import run_federation
from workflows.config import load_config

NUM_CLIENTS = 4
HONEST = (0, 1)  # fedpriv's ClientApp, unchanged
DECLARED = 2  # fedpriv's ClientApp, one field changed
STOCK = 3  # Flower's quickstart ClientApp (no report), one metric changed
# audit.attacks=[]: not about attacks (the default attacks one client a round)
SMALL = ["rounds=1", f"data.num_clients={NUM_CLIENTS}", "train.local_steps=1",
         "train.batch_size=8", "audit.accountant=rdp", "audit.attacks=[]"]  # fmt: skip
#: Every field of a fedpriv report (docs/protocol.md), the optional ones included.
REPORT_FIELDS = (
    "protocol-version", "partition-id", "server-round", "local-examples", "steps", "lr",
    "batch-size", "sampling", "sample-rate", "mechanism", "mechanism-params", "optimizer",
    "momentum", "weight-decay", "nesterov", "record-ids", "epsilon-budget", "declined",
)  # fmt: skip
DECLARED_METRICS = ("num-examples", "train-loss")
STOCK_METRICS = ("num-examples", "train_loss")

_floats = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, -1e-300, 1e10])
_ints = st.one_of(st.sampled_from([10**19, 10**300, 10**5000, -1, 0, 2**63, -(2**63)]),
                  st.integers(min_value=2**63), st.integers(max_value=0))
_strings = st.sampled_from(["", "x" * 1_001, "nan", "1e400", "[" * 100_000, "[[1e400]]",
                            '{"clip": {"nested": [1e400, NaN]}}', json.dumps([[10**300]])])
_nested = st.lists(st.recursive(st.one_of(st.integers(), st.floats()),
                                lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
                                    st.text(max_size=3), inner, max_size=2), max_leaves=6),
                   min_size=1, max_size=2)
EXTREMES = st.one_of(_ints, _floats, st.booleans(), _strings, st.lists(_ints, max_size=3),
                     _nested)


def _legal(field: str, value: object) -> bool:
    """Whether ``value`` lies in ``field``'s domain (docs/protocol.md), so the reply is not
    malformed: a loss may be any finite number, a budget any finite number > 0, a reason any
    string of 1 to 1,000 characters, and 0 is a momentum, a weight decay and a partition id."""
    number = finite_number(value)
    if field in ("train-loss", "train_loss"):
        return number is not None
    if field == "epsilon-budget":
        return number is not None and number > 0
    if field == "declined":
        return isinstance(value, str) and 0 < len(value) <= 1_000
    if field in ("momentum", "weight-decay", "partition-id"):
        return number == 0 and not isinstance(value, float)
    if field == "nesterov":  # the instructed False; True needs a momentum, which is 0 here
        return value is False
    return False


def _put(record, key: str, value: object) -> None:  # noqa: ANN001 - a Flower record
    """``record[key] = value``; a value Flower's typed records refuse (a nested list, a string
    among metrics) is put past their check: what a reply that skipped Flower's own checks holds."""
    try:
        record[key] = value
    except TypeError:
        record._data[key] = value  # noqa: SLF001 - the hostile client's side of the boundary


def _app(declared: tuple[str, object] | None, stock: tuple[str, object] | None) -> ClientApp:
    """fedpriv's ClientApp on every node but :data:`STOCK` (Flower's quickstart); node
    :data:`DECLARED` replaces one field of its reply with ``declared``, node :data:`STOCK` one
    metric with ``stock``."""

    def change(pid: int, reply: Message) -> None:
        edit = {DECLARED: declared, STOCK: stock}.get(pid)
        if edit is not None:
            field, value = edit
            where = "metrics" if field in (*DECLARED_METRICS, *STOCK_METRICS) else "meta"
            _put(reply.content[where], field, value)

    return mixed_client_app({STOCK}, change)


def _run(tmp_path, declared=None, stock=None) -> dict:  # noqa: ANN001
    cfg = load_config(QUICKSTART, SMALL)
    return run_federation(LocalGrid(_app(declared, stock), NUM_CLIENTS), cfg, tmp_path / "run")


def _outcome(report: dict, pid: int, change: tuple[str, object] | None) -> None:
    """The run completed with the honest clients aggregated; ``pid``'s changed field is its
    ``malformed`` failure naming the field, unless the value is legal there."""
    assert report["status"] == "completed" and report["error"] is None, report["error"]
    assert report["rounds"] == 1 and math.isfinite(report["accuracy"][0])
    clients = {c["client_id"]: c for c in report["clients"]}
    assert [clients[c]["rounds_participated"] for c in HONEST] == [1, 1]
    mine = [f for f in report["failures"] if f["node_id"] == str(1000 + pid)]
    if change is None:
        return
    field, value = change
    if _legal(field, value):
        assert not [f for f in mine if f["kind"] == "malformed"], mine
    else:
        assert [f["kind"] for f in mine] == ["malformed"], mine
        assert f"reply field '{field}" in mine[0]["message"], mine


FUZZ = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
changes = st.tuples(st.sampled_from((*REPORT_FIELDS, *DECLARED_METRICS)), EXTREMES)
stock_changes = st.tuples(st.sampled_from(STOCK_METRICS), EXTREMES)


@FUZZ
@given(declared=changes, stock=stock_changes)
def test_no_reply_value_ends_the_run(tmp_path_factory, declared, stock) -> None:  # noqa: ANN001
    assert set(_report()) == set(REPORT_FIELDS)  # every field a report writes is fuzzed
    report = _run(tmp_path_factory.mktemp("fuzz"), declared, stock)
    _outcome(report, DECLARED, declared)
    _outcome(report, STOCK, stock)


@pytest.mark.slow
@settings(FUZZ, max_examples=300)
@given(declared=changes, stock=stock_changes)
def test_no_reply_value_ends_the_run_many(tmp_path_factory, declared, stock) -> None:  # noqa: ANN001
    test_no_reply_value_ends_the_run.hypothesis.inner_test(tmp_path_factory, declared, stock)


@pytest.mark.parametrize("claim", [10**19, 10**300, 2**63, [10**5000]],
                         ids=["1e19", "1e300", "2^63", "a list of an unprintable integer"])
def test_a_stock_num_examples_past_int64_is_malformed_and_the_run_completes(
    tmp_path, claim: int,
) -> None:
    report = _run(tmp_path, stock=("num-examples", claim))
    _outcome(report, STOCK, ("num-examples", claim))
    (failure,) = [f for f in report["failures"] if f["node_id"] == str(1000 + STOCK)]
    assert "an integer in [1, 9,223,372,036,854,775,807]" in failure["message"], failure


@pytest.mark.slow
def test_on_flowers_ray_simulation_a_num_examples_past_int64_is_malformed(tmp_path) -> None:  # noqa: ANN001
    """The same on Flower's simulation engine (Ray): before, 0 rounds and the run failed."""
    cfg = load_config(QUICKSTART, [*SMALL, "rounds=2"])
    result = run_on_ray(cfg, _app(None, ("num-examples", 10**19)), NUM_CLIENTS, tmp_path / "run")
    assert result["status"] == "completed" and result["rounds"] == 2
    assert [(f["round"], f["kind"]) for f in result["failures"]] == [(1, "malformed"),
                                                                     (2, "malformed")]
    assert all("reply field 'num-examples'" in f["message"] for f in result["failures"])
    assert [c["rounds_participated"] for c in result["clients"]] == [2, 2, 2, 0]


def _report(**changes: object) -> dict:
    report = ClientReport(
        partition_id=0, server_round=1, local_examples=100, local_steps=1, lr=0.5,
        batch_size=8.0, sampling="poisson", sample_rate=0.08,
        mechanism=build_mechanism("gaussian", {"clip": 1.0, "noise_multiplier": 1.0}),
        oracle=GroundTruthOracle(((1, 2),)), epsilon_budget=1.0, declined="spent",
    ).to_config()
    return {**report, **changes}


# (field, a value past what the old reader could name: beyond the floats, nested past the JSON
# parser's depth, a float version, an integer past Python's digits of str())
BEYOND = [
    ("batch-size", 10**400), ("lr", -(10**400)), ("sample-rate", 10**400),
    ("momentum", 10**400), ("weight-decay", 10**400), ("epsilon-budget", 10**400),
    ("mechanism-params", "[" * 100_000), ("record-ids", "[" * 100_000),
    ("protocol-version", 1.0), ("local-examples", 10**5000),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value"), BEYOND, ids=[field for field, _ in BEYOND])
def test_a_report_field_out_of_its_domain_is_named(field: str, value: object) -> None:
    with pytest.raises(ReplyError) as caught:
        ClientReport.from_config(_report(**{field: value}))
    assert caught.value.field == field
    assert len(str(caught.value)) < 200
