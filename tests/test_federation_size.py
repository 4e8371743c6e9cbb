"""``flwr run .`` with Flower's default federation (2 simulated SuperNodes) against a preset of
10 clients: the run takes the simulation's size, or refuses at once naming both settings."""

import logging

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
    [line] = caplog.messages
    assert "2 SuperNodes" in line and "num-supernodes=10" in line


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

