"""``flwr run .`` as a first-class path (issue 41, item 2): the app's dependencies are not
installed at run time whatever the SuperLink's setting, a config carried through a process
that registers its section later still serialises, a refused preset is one line, and a run
that is not its config says so with the ε of each."""

import logging
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from fedpriv.errors import InputError
from strategies.federation_size import fewer_clients_line
from strategies.server_app import _RefusedInOneLine
from tests.reliability_support import QUICKSTART
from workflows.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement, maxsplit=1)[0].lower()


def test_the_apps_uv_sync_excludes_every_dependency_and_installs_nothing(tmp_path):
    """Flower runs ``uv sync`` in the app's directory (Flower 1.42,
    ``flwr.supercore.superexec.dependency_installer``); with every dependency excluded it
    resolves offline to nothing, so a SuperLink started without
    FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION does not build a 5.8 GB environment."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"].values()
    names = {_name(r) for r in [*project["project"]["dependencies"], *sum(extras, [])]}
    assert set(project["tool"]["uv"]["exclude-dependencies"]) == names
    pytest.importorskip("uv")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {**os.environ, "UV_OFFLINE": "1", "UV_PROJECT_ENVIRONMENT": str(tmp_path / "env"),
           "UV_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(  # Flower's command, as dependency_installer builds it
        [sys.executable, "-m", "uv", "sync", "--python", sys.executable, "--no-install-project",
         "--no-install-package", "flwr", "--inexact"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    site = list((tmp_path / "env").glob("lib/python*/site-packages"))
    assert site and not [p for p in site[0].iterdir() if p.suffix == ".dist-info"]


def test_a_carried_section_serialises_after_its_module_registers_it():
    """The ServerApp builds the config before Flower's simulation loads the ClientApp, which
    registers ``[[adversary]]``: the table carried unread must still serialise (it raised
    ``TypeError: asdict() should be called on dataclass instances``)."""
    import clients.config  # noqa: F401  registers [[adversary]]

    cfg = load_config(QUICKSTART)
    raw = [{"clients": [3], "behaviour": "no-noise"}]
    carried = replace(cfg, sections={**cfg.sections, "adversary": raw})
    assert carried.to_dict()["adversary"] == raw


def test_a_refused_config_is_one_line_in_flowers_log():
    """Flower logs what the ServerApp raised with its traceback; an InputError is one line."""
    try:
        raise InputError("adversary[0].clients", [9], "distinct client ids in [0, 1]")
    except InputError:
        record = logging.LogRecord("flwr", logging.ERROR, __file__, 1,
                                   "%s raised an exception", ("Simulation",), sys.exc_info())
    assert _RefusedInOneLine().filter(record)
    assert record.exc_info is None
    line = record.getMessage()
    assert line.startswith("fedpriv refused the run: adversary[0].clients = [9]")
    assert "\n" not in line


def test_fewer_clients_says_so_with_the_epsilon_of_each():
    cfg = load_config(QUICKSTART)
    fitted = load_config(QUICKSTART, ["data.num_clients=2"])
    line = fewer_clients_line(cfg, fitted, "deploy-local runs one client per SuperNode (2)",
                              "--supernodes 10 runs the config as written")
    assert "\n" not in line
    assert "names 10 clients" in line and "running with 2" in line
    # README: the quickstart's worst client at 10 clients spends 24.5; at 2 each holds 5x more
    before, after = (float(x) for x in re.findall(r"epsilon ([\d.]+) -> ([\d.]+)", line)[0])
    assert before == pytest.approx(24.5, abs=0.1) and after < before / 3
