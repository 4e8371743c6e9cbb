"""The config reference (docs/config.md, ``fedpriv config``) is generated from the schema: it is
up to date, names exactly the keys each table takes (as the validator's own unknown-key error
lists them), its defaults validate, and ``--explain`` finds a key or names close ones."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import run_cli

import workflows.config  # noqa: F401 - registers the application's sections
from fedpriv.config import config_entries
from fedpriv.config_reference import REGENERATE, reference_markdown, table_of
from fedpriv.errors import InputError
from fedpriv.schema import apply_override
from workflows.config import config_from_dict

DOC = Path(__file__).parents[1] / "docs" / "config.md"


def test_docs_config_md_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == reference_markdown() + "\n", (
        f"docs/config.md is out of date: regenerate it with `{REGENERATE}`")


def _known_keys(raw: dict) -> set[str]:
    """The keys the validator's unknown-key error lists for the table ``raw`` leads to."""
    with pytest.raises(InputError) as exc:
        config_from_dict(raw)
    assert exc.value.allowed.startswith("a known key: one of "), exc.value
    return set(ast.literal_eval(exc.value.allowed.removeprefix("a known key: one of ")))


@pytest.mark.parametrize("path", [
    "data", "model", "train", "mechanism", "audit", "audit.canaries", "strategy",
    "strategy.nodes[i]", "adversary[i]", "sweep", "simulation",
])
def test_each_table_lists_exactly_the_keys_the_validator_takes(path: str) -> None:
    raw: dict = {}
    node = raw
    for part in path.split("."):
        name = part.removesuffix("[i]")
        child: dict = {}
        node[name] = [child] if part.endswith("[i]") else child
        node = child
    node["no_such_key"] = 1
    listed = {e.key[len(path) + 1:] for e in config_entries() if e.key.startswith(f"{path}.")}
    first = {k.split(".")[0].removesuffix("[i]") for k in listed}  # leaves and nested tables
    assert _known_keys(raw) == first


def test_every_default_is_a_valid_value_of_its_key() -> None:
    for entry in config_entries():
        # an element of an array, a key without a default, or the record a run writes of its
        # calibration (whole, beside the value it calibrated: tests/test_target_epsilon.py)
        if "[i]" in entry.key or entry.default == "unset" or \
                entry.key.startswith("mechanism.calibration."):
            continue
        raw: dict = {}
        apply_override(raw, entry.key, json.loads(entry.default))
        config_from_dict(raw)


def test_every_entry_says_what_it_does() -> None:
    for entry in config_entries():
        assert entry.type and entry.allowed, entry
        # a description, or an allowed text that says it ("...: the false-alarm rate",
        # "(IGA's total-variation weight)", "seconds > 0 to wait for ...")
        assert entry.doc or re.search(r":|\(|\bto\b", entry.allowed), entry


def test_keys_only_named_in_error_messages_are_in_the_reference() -> None:
    text = DOC.read_text(encoding="utf-8")
    for key in ("strategy.round_timeout", "strategy.nodes[i].examples",
                "mechanism.overrides[i].clients", "adversary[i].factor", "sweep.kappas"):
        assert f"`{key}`" in text


@pytest.mark.parametrize(("key", "found"), [
    ("strategy.round_timeout", "strategy.round_timeout"),
    ("strategy.nodes[3].client", "strategy.nodes[i].client"),
    ("strategy.nodes.client", "strategy.nodes[i].client"),
    ("mechanism.overrides[0].kappa", "mechanism.kappa"),
    ("audit.canaries.method", "audit.canaries.method"),
])
def test_explain_finds_a_key_however_its_index_is_written(key, found, capsys) -> None:
    code, out, _ = run_cli(capsys, "config", "--explain", key, "--json")
    assert code == 0 and out["entry"]["key"] == found
    assert run_cli(capsys, "config", "--explain", key)[0] == 0


def test_explain_an_unknown_key_exits_2_naming_close_matches(capsys) -> None:
    code, _, err = run_cli(capsys, "config", "--explain", "strategy.round_timout")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "strategy.round_timeout" in err and "KEY" in err
    code, _, err = run_cli(capsys, "config", "--explain", "zzz")
    assert code == 2 and "none is close" in err


def test_table_names() -> None:
    assert table_of("seed") == "top level"
    assert table_of("audit.canaries.count") == "[audit.canaries]"
    assert table_of("strategy.nodes[i].client") == "[[strategy.nodes]]"
    assert table_of("adversary[i].factor") == "[[adversary]]"


def test_explain_is_a_light_command() -> None:
    code = ("import sys\nfrom workflows.cli.main import main\n"
            "main(['config', '--explain', 'train.lr'])\n"
            "print(sorted(m for m in ('torch', 'flwr', 'ray') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[1])
    assert out.stdout.strip().splitlines()[-1] == "[]"
