"""``flwr run .`` with Flower's default federation (2 simulated SuperNodes) against a preset of
10 clients: the run takes the simulation's size, or refuses at once naming both settings."""

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



def _with_adversary(cfg, clients):
    from dataclasses import replace

    return replace(cfg, sections={**cfg.sections, "adversary": [
        {"clients": clients, "behaviour": "no-noise"}]})


def test_adversaries_beyond_the_simulation_are_refused_checked_or_not(monkeypatch):
    """``configs/adversaries.toml`` on the default federation: the ServerApp built the config
    before Flower loaded the ClientApp (``[[adversary]]`` carried raw). Whether the section
    is registered by the time the run is fitted (checked: client 4 of 2) or not (unchecked),
    the run is refused, naming data.num_clients and the federation's size."""
    import clients.config  # noqa: F401  registers [[adversary]]
    import fedpriv.config

    cfg = _with_adversary(load_config(QUICKSTART), [4])
    with pytest.raises(InputError) as checked:
        fit_to_federation(_Simulated(2), cfg)
    assert "adversary[0].clients" in str(checked.value)
    monkeypatch.delitem(fedpriv.config._SECTIONS, "adversary")
    with pytest.raises(InputError) as unchecked:
        fit_to_federation(_Simulated(2), cfg)
    assert "[[adversary]] names clients" in str(unchecked.value)
    for err in (checked, unchecked):
        assert err.value.key == "data.num_clients" and "num-supernodes=10" in str(err.value)
