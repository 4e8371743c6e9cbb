"""The simulation loads the ClientApp by the import string ``flwr run`` uses.

The server side never imports ``clients``; the simulation's composition root
(:mod:`workflows.simulation`) resolves the string, which must stay the one that
``[tool.flwr.app.components]`` in pyproject.toml gives ``flwr run``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from flwr.clientapp import ClientApp

from workflows.simulation import CLIENT_APP, load_client_app

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_simulation_names_the_clientapp_flwr_run_names():
    components = tomllib.loads(PYPROJECT.read_text())["tool"]["flwr"]["app"]["components"]
    assert CLIENT_APP == components["clientapp"]


def test_the_import_string_resolves_to_a_clientapp():
    assert isinstance(load_client_app(), ClientApp)
