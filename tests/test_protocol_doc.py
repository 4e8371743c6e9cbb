"""docs/protocol.md is enough to declare a mechanism (issue 41, item 8): a ClientApp that builds
its report from the page's "Declaring a mechanism" table alone comes out ``declared`` or better;
the page's mechanism-parameter table is the registry's, and its example is what fedpriv's own
client sends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, LocalGrid

from fedpriv.config import config_from_dict
from fedpriv.data import client_sizes, load_dataset
from fedpriv.instructions import instructed_report
from fedpriv.mechanisms.base import parameter_fields
from fedpriv.mechanisms.registry import mechanism_class, mechanism_names
from strategies.server_run import run_federation
from workflows.config import load_config

PAGE = Path(__file__).parents[1] / "docs" / "protocol.md"
CASTS = {"int": int, "float": float, "str": str, "bool": bool}


def _table(marker: str) -> list[list[str]]:
    """The rows (cells, backticks kept) of the Markdown table after ``<!-- marker``."""
    text = PAGE.read_text(encoding="utf-8")
    after = text[text.index(f"<!-- {marker}"):].splitlines()[1:]
    rows = after[: next(i for i, line in enumerate(after) if not line.strip())]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_mechanism_table_is_the_registry():
    rows = {_code(r[0])[0]: r for r in _table("mechanism-params")}
    assert sorted(rows) == sorted(mechanism_names())
    for name, (_, params, unit) in rows.items():
        cls = mechanism_class(name)
        fields = parameter_fields(cls)
        assert _code(params) == [f.name for f in fields], name
        optional = re.findall(r"`([^`]+)` \(optional\)", params)
        assert optional == [f.name for f in fields if f.metadata["optional"]], name
        assert unit == cls.level


def test_the_example_is_what_fedprivs_client_sends():
    text = PAGE.read_text(encoding="utf-8")
    block = text[text.index("<!-- declare-example"):].split("```json\n", 1)[1].split("```")[0]
    example = json.loads(block)
    cfg = load_config(QUICKSTART, [])
    sent = dict(instructed_report(cfg, 0, 1, 144).to_config())
    assert example.keys() == sent.keys()
    for key, value in example.items():
        if key == "mechanism-params":
            assert json.loads(value) == json.loads(sent[key])
        else:
            assert value == sent[key] and type(value) is type(sent[key]), key


def _declared(msg: Message, context: Context, n: int) -> dict[str, Any]:
    """The report, field by field as the page's table says."""
    config = msg.content["config"]
    run = json.loads(config["fedpriv-config"])
    report: dict[str, Any] = {}
    for field_cell, type_cell, source in _table("declare-fields"):
        (field,) = _code(field_cell)
        names = _code(source)
        if source.startswith("the constant"):
            value: Any = json.loads(names[0])
        elif source.startswith("node config"):
            value = context.node_config[names[0]]
        elif source.startswith("message config"):
            value = config[names[0]]
        elif source.startswith("run config"):
            section, key = names[0].split(".")
            value = run[section][key]
        elif field == "local-examples":
            value = n
        elif field == "sample-rate":
            value = min(report["batch-size"], n) / n
        elif field == "mechanism-params":
            mechanism = run["mechanism"]
            (names,) = (_code(r[1]) for r in _table("mechanism-params")
                        if _code(r[0]) == [mechanism["name"]])
            value = json.dumps({p: mechanism[p] for p in names if mechanism.get(p) is not None})
        else:
            raise AssertionError(f"the page does not say where {field} comes from: {source}")
        report[field] = CASTS[type_cell.strip("`")](value)
    return report


def _client_of_its_own(sizes: list[int]) -> ClientApp:
    """No fedpriv import: trains on nothing (zero gradients, within any clip bound) and
    releases the declared Gaussian noise each step, as the page's update formula says."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        report = _declared(msg, context, sizes[int(context.node_config["partition-id"])])
        params = json.loads(report["mechanism-params"])
        scale = params["noise_multiplier"] * params["clip"]
        rng = np.random.default_rng([report["partition-id"], report["server-round"]])
        theta = msg.content["arrays"].to_numpy_ndarrays()
        names = list(msg.content["arrays"].keys())
        new = []
        for a in theta:
            noise = sum(rng.normal(0.0, scale, a.shape) for _ in range(report["steps"]))
            new.append((a - report["lr"] * noise / report["batch-size"]).astype(a.dtype))
        content = RecordDict({
            "arrays": ArrayRecord({name: Array(np.ascontiguousarray(a))
                                   for name, a in zip(names, new, strict=True)}),
            "metrics": MetricRecord({"num-examples": report["local-examples"]}),
            "meta": ConfigRecord(report),
        })
        return Message(content=content, reply_to=msg)

    return app


def test_a_client_written_from_the_page_is_declared(tmp_path):
    cfg = load_config(QUICKSTART, ["rounds=2", "data.num_clients=3", "train.local_steps=2",
                                   "audit.attacks=[]"])  # the default attacks a client a round
    raw = json.loads(cfg.to_json())
    data = config_from_dict(raw).data
    labels = load_dataset(data.name, data.root, data.download, cfg.seed,
                          data.test_fraction).train_y.numpy()
    sizes = client_sizes(data, labels, cfg.seed)
    report = run_federation(LocalGrid(_client_of_its_own(sizes), 3), cfg, tmp_path / "run")
    assert report["status"] == "completed" and report["failures"] == []
    for client in report["clients"]:
        assert client["verification"]["status"] == "consistent", client["verification"]
        assert client["guarantee"] in {"declared", "verified"}
        assert client["rounds_participated"] == 2 and client["epsilon"] < float("inf")
