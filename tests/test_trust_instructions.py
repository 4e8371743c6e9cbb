"""The server believes its own instructions, and knows who is who (issue 25, items 2 and 3).

Cheating clients, through the real server code in process (``LocalGrid``, which knows each
node's partition as Flower's simulation engine does): a reply that declares other settings
than the server sent (lr × 0.1 hiding noise × 0.1, 5 steps declared as 1, ``adam`` in an SGD
run hiding a client that adds no noise, σ = 2 declared for σ = 1) is ``inconsistent`` on test
``settings`` — not aggregated, ε unbounded, the claim kept beside it; a node claiming another
client's partition id is that node's own ``identity`` failure while the real client is
aggregated; a declared n = 10⁹ is ``size-sampling`` inconsistent where the server knows the
partition, and outside simulation its aggregation weight is capped. Honest runs of the
quickstart and mixed-mechanisms presets carry no new failure or inconsistent verdict.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, LocalGrid, client_app_with

from fedpriv.config import Config
from fedpriv.errors import InputError
from fedpriv.protocol import CONFIG_KEY, server_config
from strategies.identity import aggregation_weights
from strategies.server_run import run_federation
from workflows.config import load_config

ROOT = Path(__file__).resolve().parents[1]
MIXED = ROOT / "configs" / "mixed-mechanisms.toml"
ROUNDS = 2
NO_ATTACKS = "audit.attacks=[]"  # not about attacks: the default attacks one client a round
SMALL = [f"rounds={ROUNDS}", "data.num_clients=8", "train.local_steps=5", NO_ATTACKS]
BIG_N = 10**9
KNOWN = ("settings", "size-sampling", "identity")  # what the server checks from what it knows


def _noise_times(msg: Message, factor: float) -> None:
    """Train with σ × ``factor``: an override for this client alone in its copy of the config."""
    cfg = Config.from_json(server_config(msg.content.config_records.get("config")))
    raw = cfg.to_dict()
    raw["mechanism"]["overrides"] = [{"clients": [5], "noise_multiplier": factor}]
    config = ConfigRecord({**msg.content["config"], CONFIG_KEY: json.dumps(raw)})
    msg.content = RecordDict({**msg.content, "config": config})


def _declare_sigma_1(report: ConfigRecord) -> None:
    report["mechanism-params"] = json.dumps({**json.loads(report["mechanism-params"]),
                                             "noise_multiplier": 1.0}, sort_keys=True)


def _clip_only(msg: Message) -> None:
    cfg = Config.from_json(server_config(msg.content.config_records.get("config")))
    raw = cfg.to_dict()
    raw["mechanism"]["overrides"] = [{"clients": [3], "name": "clip"}]
    config = ConfigRecord({**msg.content["config"], CONFIG_KEY: json.dumps(raw)})
    msg.content = RecordDict({**msg.content, "config": config})


def _declare_gaussian(report: ConfigRecord) -> None:
    report["mechanism"] = "gaussian"
    report["mechanism-params"] = json.dumps({"clip": 1.0, "noise_multiplier": 1.0},
                                            sort_keys=True)


def _big_n(report: ConfigRecord, reply: Message) -> None:
    report["local-examples"] = BIG_N
    report["sample-rate"] = float(report["batch-size"]) / BIG_N
    reply.content["metrics"]["num-examples"] = BIG_N


# partition id -> (before training: the message, after: the report and the reply)
CHEATS = {
    0: (None, lambda r, m: r.__setitem__("partition-id", 6)),  # node 1000 replies first
    2: (None, lambda r, m: r.__setitem__("steps", 1)),  # trained 5 steps
    3: (_clip_only, lambda r, m: (_declare_gaussian(r), r.__setitem__("optimizer", "adam"))),
    4: (None, lambda r, m: r.__setitem__("mechanism-params", json.dumps(
        {"clip": 1.0, "noise_multiplier": 2.0}, sort_keys=True))),
    5: (lambda m: _noise_times(m, 0.1),
        lambda r, m: (_declare_sigma_1(r), r.__setitem__("lr", float(r["lr"]) * 0.1))),
    7: (None, lambda r, m: _big_n(r, m)),
}
HONEST = (6,)
DIFFERING = {2: "steps: sent 5, declared 1", 3: "optimizer: sent 'sgd', declared 'adam'",
             4: "mechanism-params.noise_multiplier: sent 1.0, declared 2.0",
             5: "lr: sent 4.0, declared 0.4"}


def _cheating_app() -> ClientApp:

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        pid = int(context.node_config["partition-id"])
        before, after = CHEATS.get(pid, (None, None))
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, context)
        if before is not None:
            before(msg)
        reply = call_next(msg, context)
        if after is not None:
            after(reply.content["meta"], reply)
        return reply

    return client_app_with(mod)


@pytest.fixture(scope="module")
def cheated(tmp_path_factory) -> dict:  # noqa: ANN001
    cfg = load_config(QUICKSTART, SMALL)
    return run_federation(LocalGrid(_cheating_app(), 8), cfg,
                          tmp_path_factory.mktemp("cheats") / "run")


def _clients(report: dict) -> dict[int, dict]:
    return {c["client_id"]: c for c in report["clients"]}


def _parts(verdict: dict) -> dict[str, dict]:
    """The verdict's parts by test name, nested ones included."""
    out = {}
    for part in verdict.get("parts", []):
        out[part["test"]] = part
        out.update(_parts(part))
    return out


def test_the_run_completes(cheated: dict) -> None:
    assert cheated["status"] == "completed" and cheated["rounds"] == ROUNDS


@pytest.mark.parametrize("pid", sorted(DIFFERING))
def test_a_declared_setting_that_differs_is_inconsistent(cheated: dict, pid: int) -> None:
    client = _clients(cheated)[pid]
    verdict = client["verification"]
    assert verdict["status"] == "inconsistent" and verdict["round"] == 1
    settings = _parts(verdict)["settings"]
    assert settings["status"] == "inconsistent"
    assert DIFFERING[pid] in settings["reason"], settings["reason"]
    assert client["rounds_participated"] == 0  # stored, never aggregated
    assert client["guarantee"] == "unbounded" and math.isinf(client["epsilon"])
    assert math.isfinite(client["epsilon_declared"])  # the claim, kept beside it
    kinds = {(f["round"], f["kind"]) for f in client["failures"]}
    assert kinds == {(r, "inconsistent") for r in range(1, ROUNDS + 1)}
    assert all(f["message"].startswith("reply inconsistent with what the server knows: "
                                       "settings: ") for f in client["failures"])


def test_the_lr_cheat_passes_the_noise_test_alone(cheated: dict) -> None:
    """Client 5 trains with σ × 0.1 and declares lr × 0.1: its update passes the statistical
    tests at the declared lr (the cheat is real), and only the settings catch it."""
    parts = _parts(_clients(cheated)[5]["verification"])
    tested = {t: p["status"] for t, p in parts.items() if t not in KNOWN}
    assert tested and "inconsistent" not in tested.values(), tested
    assert "consistent" in tested.values()
    assert parts["settings"]["status"] == "inconsistent"


def test_identity_theft_fails_the_thief_and_spares_the_client(cheated: dict) -> None:
    clients = _clients(cheated)
    victim, thief = clients[6], clients[0]
    assert victim["rounds_participated"] == ROUNDS
    assert victim["verification"]["status"] == "consistent" and victim["failures"] == []
    assert _parts(victim["verification"])["identity"]["status"] == "consistent"
    assert thief["rounds_participated"] == 0
    assert [(f["kind"], f["node_id"]) for f in thief["failures"]] == [("identity", "1000")] * 2
    assert all("is client 0, but claims client 6" in f["message"] for f in thief["failures"])


def test_a_declared_size_the_server_knows_otherwise_is_inconsistent(cheated: dict) -> None:
    client = _clients(cheated)[7]
    size = _parts(client["verification"])["size-sampling"]
    assert size["status"] == "inconsistent"
    assert f"declared local size n = {BIG_N}" in size["reason"]
    assert client["rounds_participated"] == 0 and math.isinf(client["epsilon"])


def test_the_honest_client_is_verified_on_every_known_property(cheated: dict) -> None:
    from strategies.identity import partition_sizes
    from strategies.server_run import dataset_of

    cfg = load_config(QUICKSTART, SMALL)
    sizes = partition_sizes(cfg, dataset_of(cfg))
    for pid in HONEST:
        client = _clients(cheated)[pid]
        verdict = client["verification"]
        assert verdict["status"] == "consistent"
        parts = _parts(verdict)
        for test in KNOWN:
            assert parts[test]["status"] == "consistent", (test, parts[test])
        # a size the engine gives keeps its amplification by sampling
        q = cfg.train.batch_size / sizes[pid]
        expected = _account(cfg, q, ROUNDS * cfg.train.local_steps)
        assert client["epsilon"] == client["epsilon_declared"] == pytest.approx(expected,
                                                                                  rel=1e-9)
        assert client["sampling"] == "poisson"
    assert cheated["epsilon_bounds"]["unamplified_clients"] == [7]  # its n contradicted


@pytest.mark.parametrize("preset", [QUICKSTART, MIXED], ids=["quickstart", "mixed"])
def test_honest_presets_have_no_new_failures(preset: Path, tmp_path: Path) -> None:
    from clients.client_app import app

    cfg = load_config(preset, ["rounds=2", NO_ATTACKS])
    report = run_federation(LocalGrid(app, cfg.data.num_clients), cfg, tmp_path / "run")
    assert report["failures"] == []
    assert report["identity"]["binding"] == "simulation engine"
    for client in report["clients"]:
        assert client["verification"]["status"] != "inconsistent", client["verification"]
        parts = _parts(client["verification"])
        assert parts["settings"]["status"] == "consistent"
        assert parts["size-sampling"]["status"] == "consistent"
        assert parts["identity"]["status"] == "consistent"


# -- outside simulation: the registry, first claim, capped weights ----------------------------

def _unbound_grid(app: ClientApp, n: int) -> LocalGrid:
    grid = LocalGrid(app, n)
    grid.node_partitions = None  # a deployment's grid: the server knows no partition
    return grid


def test_first_claim_binding_is_labelled_and_a_big_n_is_capped(tmp_path: Path, caplog) -> None:
    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        if msg.metadata.message_type == MessageType.TRAIN and \
                int(context.node_config["partition-id"]) == 2:
            _big_n(reply.content["meta"], reply)
        return reply

    app = client_app_with(mod)
    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=3", "train.local_steps=1",
                                   NO_ATTACKS])
    with caplog.at_level(logging.WARNING, logger="strategies.identity"):
        report = run_federation(_unbound_grid(app, 3), cfg, tmp_path / "run")
    clients = _clients(report)
    identity = _parts(clients[0]["verification"])["identity"]
    assert identity["status"] == "unverifiable" and "first-claim (unverified)" in identity["reason"]
    assert report["identity"]["binding"] == "first-claim (unverified)"
    assert _parts(clients[2]["verification"])["size-sampling"]["status"] == "unverifiable"
    assert clients[2]["rounds_participated"] == 1  # aggregated, at the round's median size
    capped = [r.getMessage() for r in caplog.records if "aggregation weight" in r.getMessage()]
    assert len(capped) == 1 and "client 2" in capped[0], capped
    weight = float(capped[0].split("aggregation weight ")[1].split()[0])
    assert 400 < weight < 700 and f"num-examples = {BIG_N:g}" in capped[0]  # the median
    # nor does the claim buy amplification by sampling: ε at q = 1, the claim's ε beside it
    big, steps = clients[2], cfg.train.local_steps
    assert big["epsilon"] == pytest.approx(_account(cfg, 1.0, steps), rel=1e-9)
    claimed = _account(cfg, cfg.train.batch_size / BIG_N, steps)
    assert big["epsilon_declared"] == pytest.approx(claimed, rel=1e-9)
    assert claimed < 1e-6
    assert big["epsilon_observed"]["value"] >= big["epsilon"] > 1.0
    assert big["sampling"] == "none (q = 1 in 1 of 1 rounds: local size not verified by the server)"
    bounds = report["epsilon_bounds"]  # and the report says so, for every unverified client
    assert bounds["unamplified_clients"] == [0, 1, 2]
    assert bounds["note"].startswith("epsilon of client(s) 0, 1, 2: at q = 1")
    assert "per-record sensitivity" in bounds["epsilon_observed"]


def _account(cfg: Config, sample_rate: float, steps: int) -> float:
    """``fedpriv account``'s ε of the quickstart's Gaussian at ``sample_rate`` and ``steps``."""
    from fedpriv.commands.account import account

    return account("gaussian", sample_rate=sample_rate, steps=steps, delta=cfg.audit.delta,
                   accountant=cfg.audit.accountant, noise_multiplier=1.0)["epsilon"]


def test_aggregation_weights_follow_only_what_the_server_knows() -> None:
    declared = [100.0, 120.0, BIG_N]
    assert aggregation_weights(declared, [None, None, None], "capped", 10.0) == \
        [100.0, 120.0, 1200.0]
    assert aggregation_weights(declared, [None, None, None], "median", 10.0) == [120.0] * 3
    assert aggregation_weights([100.0, BIG_N], [None, None], "capped", 10.0) == [100.0, 1000.0]
    assert aggregation_weights(declared, [100, 120, 90], "capped", 10.0) == [100.0, 120.0, 90.0]
    assert aggregation_weights([], [], "capped", 10.0) == []


def test_the_registry_binds_nodes_and_refuses_strangers(tmp_path: Path) -> None:
    from clients.client_app import app
    from strategies.identity import partition_sizes
    from strategies.server_run import dataset_of

    small = ["rounds=1", "data.num_clients=3", "train.local_steps=1", NO_ATTACKS]
    size = partition_sizes(load_config(QUICKSTART, small), dataset_of(load_config(QUICKSTART)))[1]
    registry = ("strategy.nodes=[{node_id=1000,client=0},"
                f"{{node_id=1001,client=1,examples={size}}}]")
    cfg = load_config(QUICKSTART, [*small, registry])
    report = run_federation(_unbound_grid(app, 3), cfg, tmp_path / "run")
    clients = _clients(report)
    assert report["identity"]["binding"] == "strategy.nodes"
    for cid in (0, 1):
        parts = _parts(clients[cid]["verification"])
        assert parts["identity"]["status"] == "consistent", parts["identity"]
        assert "strategy.nodes" in parts["identity"]["reason"]
    assert _parts(clients[1]["verification"])["size-sampling"]["status"] == "consistent"
    assert _parts(clients[0]["verification"])["size-sampling"]["status"] == "unverifiable"
    stranger = [f for f in report["failures"] if f["node_id"] == "1002"]
    assert [f["kind"] for f in stranger] == ["identity"]
    assert "not a node of this federation" in stranger[0]["message"]


@pytest.mark.parametrize(("nodes", "key"), [
    ("[{client=0}]", "strategy.nodes[0].node_id"),
    ("[{node_id=5}]", "strategy.nodes[0].client"),
    ("[{node_id=5,client=0},{node_id=5,client=1}]", "strategy.nodes[1].node_id"),
    ("[{node_id=5,client=0},{node_id=6,client=0}]", "strategy.nodes[1].client"),
    ("[{node_id=5,client=10}]", "strategy.nodes[0].client"),
    ("[{node_id=5,client=0,examples=0}]", "strategy.nodes[0].examples"),
    ("[{node_id=5,client=0,name=1}]", "strategy.nodes[0].name"),
])
def test_a_bad_registry_names_its_key(nodes: str, key: str) -> None:
    with pytest.raises(InputError) as caught:
        load_config(QUICKSTART, [f"strategy.nodes={nodes}"])
    assert caught.value.key == key


@pytest.mark.parametrize(("setting", "key"), [
    ("strategy.weighting='largest'", "strategy.weighting"),
    ("strategy.weight_cap=0.5", "strategy.weight_cap"),
])
def test_a_bad_weighting_names_its_key(setting: str, key: str) -> None:
    with pytest.raises(InputError) as caught:
        load_config(QUICKSTART, [setting])
    assert caught.value.key == key


@pytest.mark.slow
def test_on_flowers_ray_simulation_the_engine_binds_nodes(tmp_path: Path) -> None:
    """On Flower's simulation engine (random node ids, replies in arrival order) the server
    reads each node's partition from the engine: the thief (partition 0 claiming 2) is its own
    identity failure whatever the order, the real client 2 is aggregated, and client 1's
    n = 10⁹ is inconsistent with the partition the server computes."""
    from reliability_support import run_on_ray

    def mod(msg: Message, context: Context, call_next):  # noqa: ANN001, ANN202
        reply = call_next(msg, context)
        pid = int(context.node_config["partition-id"])
        if msg.metadata.message_type == MessageType.TRAIN and pid == 0:
            reply.content["meta"]["partition-id"] = 2
        if msg.metadata.message_type == MessageType.TRAIN and pid == 1:
            _big_n(reply.content["meta"], reply)
        return reply

    app = client_app_with(mod)
    cfg = load_config(QUICKSTART, ["rounds=1", "data.num_clients=4", "train.local_steps=1",
                                   NO_ATTACKS])
    report = run_on_ray(cfg, app, 4, tmp_path / "run")
    clients = _clients(report)
    assert report["status"] == "completed"
    for cid in (2, 3):
        assert clients[cid]["rounds_participated"] == 1
        assert clients[cid]["verification"]["status"] == "consistent"
        assert _parts(clients[cid]["verification"])["identity"]["status"] == "consistent"
    assert [f["kind"] for f in clients[0]["failures"]] == ["identity"]
    assert "is client 0, but claims client 2" in clients[0]["failures"][0]["message"]
    assert _parts(clients[1]["verification"])["size-sampling"]["status"] == "inconsistent"
