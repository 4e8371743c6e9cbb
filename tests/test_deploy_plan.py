"""deploy-local before any process starts: flag and config validation (exit 2), what goes to
each SuperNode's --node-config, and the files Flower reads back — each checked with Flower's
own parsers or the ClientApp's own mapping, not with ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedpriv.errors import InputError
from workflows.cli.main import main
from workflows.config import load_config
from workflows.deploy.federation import FEDERATION_MARKER, Federation
from workflows.deploy.flwr_cli import FlwrCli, flower_env
from workflows.deploy.hosts import Host
from workflows.deploy.local import node_configs, plan_deployment

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "configs" / "quickstart.toml")

MIXED = """
rounds = 2
[data]
num_clients = 3
[mechanism]
name = "gaussian"
noise_multiplier = 1.0
[[mechanism.overrides]]
clients = [0, 2]
name = "vmf"
kappa = 50.0
[[mechanism.overrides]]
clients = [2]
name = "laplace"
laplace_scale = 2.0
clip = 0.5
"""


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--supernodes", "2", "--auth"], "--auth"),
        (["--supernodes", "0"], "--supernodes"),
        (["--supernodes", "2", "--timeout", "0"], "--timeout"),
        (["--supernodes", "2", "--set", "rounds = 3"], "--set"),
        (["--supernodes", "2", "--set", "data.num_clients=5"], "--set"),
        (["--supernodes", "2", "--set", "rounds=0"], "rounds"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, flag, capsys, tmp_path: Path) -> None:
    code = main(["deploy-local", QUICKSTART, *argv, "--out", str(tmp_path), "--json"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: {flag} = " in err
    assert not (tmp_path / "flower").exists()  # nothing was started


def test_missing_config_exits_2(capsys, tmp_path: Path) -> None:
    code = main(["deploy-local", str(tmp_path / "nope.toml"), "--supernodes", "1"])
    assert code == 2
    assert "CONFIG" in capsys.readouterr().err


def test_override_ids_beyond_the_supernodes_are_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "mixed.toml"
    cfg.write_text(MIXED)
    with pytest.raises(InputError, match=r"mechanism\.overrides\[0\]\.clients"):
        plan_deployment(cfg, 2, tmp_path / "run")


def test_node_config_carries_each_clients_override(tmp_path: Path) -> None:
    """A client reading only its node config gets the mechanism the overrides give it."""
    from fedpriv.instructions import client_mechanism
    from fedpriv.mechanisms import build_mechanism

    path = tmp_path / "mixed.toml"
    path.write_text(MIXED)
    with_overrides = load_config(path)
    without = load_config(path, ["mechanism.overrides=[]"])
    nodes = node_configs(with_overrides)
    assert nodes[1] == {}
    for pid, node in enumerate(nodes):
        expected = build_mechanism(*with_overrides.mechanism.for_client(pid))
        assert client_mechanism(without, pid, node) == expected


def test_plan_is_absolute_and_sets_one_client_per_supernode(tmp_path: Path) -> None:
    plan = plan_deployment(Path(QUICKSTART), 3, tmp_path / "run", ["rounds=2"])
    assert plan.home == (tmp_path / "run" / "flower").resolve()
    assert Path(plan.run_config["config"]).is_absolute()
    assert Path(plan.run_config["out"]).is_absolute()
    assert plan.run_config["set"].split() == ["rounds=2", "data.num_clients=3"]
    assert len(plan.node_configs) == 3


def test_app_without_the_run_config_keys_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.flwr.app.config]\nconfig = ""\n')
    with pytest.raises(InputError, match="--app"):
        plan_deployment(Path(QUICKSTART), 2, tmp_path / "run", app_dir=tmp_path)


def test_federation_arguments_are_validated() -> None:
    with pytest.raises(InputError, match="auth"):
        Federation(Path("unused"), 2, auth=True)
    with pytest.raises(InputError, match="supernodes"):
        Federation(Path("unused"), 0)
    with pytest.raises(InputError, match="^node_hosts = "):
        Federation(Path("unused"), 2, node_hosts=[Host("10.0.0.2", "ns")])
    with pytest.raises(InputError, match="^connect_timeout = "):
        Federation(Path("unused"), 2, connect_timeout=0)


A, B = Host("10.231.7.1", "fpx-a"), Host("10.231.7.2", "fpx-b")


def test_a_federation_across_hosts_dials_and_certifies_the_superlinks_address(
    tmp_path: Path,
) -> None:
    fed = Federation(tmp_path, 1, tls=True, superlink_host=A, node_hosts=[B], connect_timeout=20)
    fed.port = 9092
    assert fed.address == "10.231.7.1:9092"
    assert fed.cert_names == ("10.231.7.1",)
    argv = fed.supernode_argv(0, 19094, ca=tmp_path / "ca.crt", key=None)
    assert argv[argv.index("--superlink") + 1] == "10.231.7.1:9092"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"  # the node's runtime API stays local
    assert argv[argv.index("--max-wait-time") + 1] == "20"
    other = fed.supernode_argv(0, 19094, ca=None, key=None, superlink="name.test:9092")
    assert other[other.index("--superlink") + 1] == "name.test:9092"
    assert "--max-wait-time" not in Federation(tmp_path, 1).supernode_argv(0, 1, ca=None, key=None)
    assert Federation(tmp_path, 1).cert_names == ("localhost", "127.0.0.1")


def test_every_component_has_its_own_flower_home_and_the_federations_marker(
    tmp_path: Path,
) -> None:
    fed = Federation(tmp_path, 2, cli_host=B)
    env = fed.env(tmp_path / "supernode-1")
    assert env["FLWR_HOME"] == str(tmp_path / "supernode-1")
    assert env[FEDERATION_MARKER] == str(tmp_path.resolve())
    assert fed.flwr.home == tmp_path.resolve() / "cli"
    assert fed.flwr.env["FLWR_HOME"] == str(tmp_path.resolve() / "cli")
    fed.flwr.home.mkdir()
    run = fed.flwr.run_argv(tmp_path, {"config": "c", "out": "/o", "set": ""})
    assert run[:4] == ["ip", "netns", "exec", "fpx-b"]
    assert Path(run[4]).name == "flwr" and run[5] == "run"


def test_a_deployments_clients_keep_their_noise_secret(tmp_path: Path, monkeypatch) -> None:
    """Neither the SuperNodes' node config nor their environment opts in to the run seed's
    stream (:func:`fedpriv.seeding.client_noise_seed`), even where the operator's shell has the
    simulator's switch; a node's own ``--node-config`` may."""
    from flwr.common.config import parse_config_args

    from fedpriv.seeding import REPRODUCIBLE_NOISE_ENV, REPRODUCIBLE_NOISE_KEY, client_noise_seed

    monkeypatch.setenv(REPRODUCIBLE_NOISE_ENV, "1")
    plan = plan_deployment(Path(QUICKSTART), 2, tmp_path / "out")
    fed = Federation(tmp_path, 2, node_configs=plan.node_configs)
    env = fed.env(tmp_path / "supernode-0")
    assert REPRODUCIBLE_NOISE_ENV not in env
    for index in range(2):
        argv = fed.supernode_argv(index, 12345, ca=None, key=None)
        node_config = parse_config_args([argv[argv.index("--node-config") + 1]])
        assert client_noise_seed(0, node_config, env) is None
    opted = Federation(tmp_path, 1, node_configs=[{REPRODUCIBLE_NOISE_KEY: True}])
    argv = opted.supernode_argv(0, 12345, ca=None, key=None)
    assert client_noise_seed(0, parse_config_args([argv[argv.index("--node-config") + 1]]),
                             env) == 0


def test_node_config_string_parses_back_with_flowers_parser(tmp_path: Path) -> None:
    from flwr.common.config import parse_config_args

    extra = {"mechanism": "vmf", "kappa": 50.0, "note": "two words"}
    fed = Federation(tmp_path, 2, node_configs=[{}, extra])
    argv = fed.supernode_argv(1, 12345, ca=None, key=None)
    node_config = argv[argv.index("--node-config") + 1]
    assert parse_config_args([node_config]) == {"partition-id": 1, "num-partitions": 2, **extra}
    assert "--insecure" in argv and argv[argv.index("--host") + 1] == "127.0.0.1"


@pytest.mark.parametrize("ca", [None, "ca.crt"])
def test_connection_reads_back_with_flowers_reader(tmp_path: Path, monkeypatch, ca) -> None:
    from flwr.cli.flower_config import read_superlink_connection

    monkeypatch.setenv("FLWR_HOME", str(tmp_path))
    root = tmp_path / ca if ca else None
    if root:
        root.write_text("")
    FlwrCli(tmp_path, flower_env(tmp_path)).write_connection("127.0.0.1:18000", root)
    conn = read_superlink_connection()
    assert conn.address == "127.0.0.1:18000"
    assert conn.insecure is (root is None)
    assert conn.root_certificates == (str(root) if root else None)


def test_run_config_file_reads_back_with_flowers_parser(tmp_path: Path) -> None:
    from flwr.common.config import parse_config_args

    run_config = {"config": '/dir with space/"q".toml', "out": "/abs/out", "set": "a=1 b=x"}
    argv = FlwrCli(tmp_path, flower_env(tmp_path)).run_argv(tmp_path, run_config)
    assert argv[1:3] == ["run", str(tmp_path)]
    assert parse_config_args([argv[argv.index("--run-config") + 1]]) == run_config


def test_exit_report_quotes_flowers_last_exit_report(tmp_path: Path) -> None:
    fed = Federation(tmp_path, 1)
    (tmp_path / "logs").mkdir()
    log = [
        "WARNING: Connection attempt failed, retrying in 0.3 seconds",
        "ERROR: Exit Code: 305",
        "Failed to initialize the connection to the SuperLink.",
        "[Errno 101] Network is unreachable",
        "For more information, visit: <https://flower.ai/docs/.../305.html>",
        *[f"INFO: shutting down {i}" for i in range(30)],
    ]
    (tmp_path / "logs" / "supernode-3.log").write_text("\n".join(log) + "\n")
    assert fed.exit_report("supernode-3").splitlines() == log[1:5]
    (tmp_path / "logs" / "superlink.log").write_text("\n".join(log[5:]) + "\n")
    assert fed.exit_report("superlink").splitlines() == log[-20:]  # no report: the tail
