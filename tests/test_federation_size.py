"""``flwr run .`` with Flower's default federation (2 simulated SuperNodes) against a preset of
10 clients: the run takes the simulation's size, or refuses at once naming both settings."""

import dataclasses
import logging
import re

import pytest
from flwr.superlink.grid import InMemoryGrid

from fedpriv.errors import InputError
from strategies.federation_size import fit_to_federation
from tests.reliability_support import QUICKSTART, LocalGrid
from workflows.config import load_config


class _Simulated(InMemoryGrid):
    """An in-memory (simulation) grid with ``n`` registered nodes."""

    def __init__(self, n: int) -> None:  # no link state: only the node count is asked for
        self.n = n

    def get_node_ids(self):  # noqa: ANN201
        return list(range(1, self.n + 1))


def test_a_simulation_with_fewer_supernodes_runs_with_that_many_clients(caplog):
    cfg = load_config(QUICKSTART)
    assert cfg.data.num_clients == 10
    with caplog.at_level(logging.WARNING, logger="strategies.federation_size"):
        fitted = fit_to_federation(_Simulated(2), cfg)
    assert fitted.data.num_clients == 2 and fitted.rounds == cfg.rounds
    assert fitted.mechanism == cfg.mechanism and fitted.audit == cfg.audit
    [line] = [r.getMessage() for r in caplog.records if r.name == "strategies.federation_size"]
    assert "2 SuperNodes" in line and "num-supernodes=10" in line
    assert re.search(r"largest client epsilon [\d.]+ -> [\d.]+", line)


def test_a_matching_simulation_and_a_deployment_keep_the_config():
    cfg = load_config(QUICKSTART)
    assert fit_to_federation(_Simulated(10), cfg) is cfg
    assert fit_to_federation(LocalGrid(None, num_nodes=2), cfg) is cfg  # not a simulation


def test_a_config_that_cannot_shrink_is_refused_naming_both_settings():
    cfg = load_config(QUICKSTART, ["audit.clients=[0, 9]"])
    with pytest.raises(InputError) as err:
        fit_to_federation(_Simulated(2), cfg)
    assert err.value.key == "data.num_clients"
    assert "num-supernodes=10" in str(err.value) and "audit.clients" in str(err.value)




ADVERSARIES = QUICKSTART.parent / "adversaries.toml"


def test_the_adversaries_preset_on_two_supernodes_is_refused_in_one_line():
    """``flwr run .`` with configs/adversaries.toml on Flower's default federation (issue 41,
    item 2): refused naming the adversary table, whether the server read ``[[adversary]]``
    validated or carried unread (it does not import the clients; a ClientApp imported into the
    same process registers the section after the config was loaded)."""
    registered = load_config(ADVERSARIES)
    raw_tables = registered.to_dict()["adversary"]
    carried = dataclasses.replace(registered,
                                  sections={**registered.sections, "adversary": raw_tables})
    for cfg in (registered, carried):
        with pytest.raises(InputError) as err:
            fit_to_federation(_Simulated(2), cfg)
        text = str(err.value)
        assert "\n" not in text and "adversary[0].clients" in text and "num-supernodes=10" in text
    # the copy of a config whose section stayed plain: was TypeError from dataclasses.asdict()
    assert carried.to_dict()["adversary"] == raw_tables


# audit.attacks=[]: not about attacks (the default attacks one client a round)
_SERVER_APP = """
import sys
from flwr.app import Context, RecordDict
from strategies.server_app import main
from workflows.local_grid import LocalGrid
from workflows.simulation import load_client_app
config = {{"config": "configs/quickstart.toml", "out": {out!r},
          "set": "rounds=1 data.num_clients=2 train.local_steps=1 audit.attacks=[] {extra}"}}
try:
    main(LocalGrid(load_client_app(), 2), Context(run_id=1, node_id=0, node_config={{}},
                                                 state=RecordDict(), run_config=config))
except ValueError as exc:  # fedpriv.errors.InputError
    print("raised:", exc)
"""


def _server_app(out, extra=""):  # noqa: ANN001, ANN202 - in its own process: its log handlers
    import subprocess
    import sys
    from pathlib import Path

    code = _SERVER_APP.format(out=str(out), extra=extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parents[1], timeout=600, check=True)


def test_the_server_app_names_the_run_directory_and_ends_with_the_summary(tmp_path):
    """``flwr run .`` (issue 41, item 2): the ServerApp logs where the results go at the start
    and the table ``fedpriv simulate`` prints at the end."""
    run = _server_app(tmp_path / "run")
    lines = run.stderr.splitlines()
    start = [line for line in lines if "fedpriv run directory: " in line]
    assert len(start) == 1 and str(tmp_path / "run") in start[0]
    assert any(line.endswith("client mechanism rounds   epsilon      log C     SSIM")
               for line in lines)
    assert any("chain head: " in line for line in lines)
    assert (tmp_path / "run" / "report.html").is_file()


def test_the_server_app_refuses_a_bad_config_in_one_line(tmp_path):
    run = _server_app(tmp_path / "run", extra="train.lr=-1")
    assert run.stdout.startswith("raised: train.lr") and "\n" not in run.stdout.strip()
    assert "fedpriv run directory" not in run.stderr  # refused before anything is announced
    assert not (tmp_path / "run").exists()
