"""Real deployments on 127.0.0.1 (slow): SuperLink + 2 SuperNodes running the fedpriv apps,
insecure and with TLS + SuperNode authentication; a SuperNode killed mid-run; SuperNodes
that must not get in. After every test no process of the federation is alive, and every
socket it listened on was bound to 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from process_support import PATIENCE

from workflows.cli.main import main
from workflows.deploy.federation import FEDERATION_MARKER, Federation
from workflows.deploy.local import plan_deployment
from workflows.deploy.ports import free_ports
from workflows.deploy.processes import processes_with_env
from workflows.deploy.tls import write_supernode_key, write_tls_files

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc"),
]

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.toml"
FAST = ["rounds=2", "train.local_steps=2"]
# Not about attacks (the insecure deployment keeps the default: one client attacked, round 1)
NO_ATTACKS = [*FAST, "audit.attacks=[]"]
CLIENT_KEYS = {
    "client_id", "mechanism", "rounds_participated", "epsilon", "delta",
    "log_bayes_capacity", "mbp_bound", "mbp_estimate", "abp_estimate", "attack",
}  # fmt: skip


def _listening(pids: list[int]) -> set[str]:
    """``ip:port`` of the TCP sockets in LISTEN state held by ``pids`` (IPv6 ones tagged)."""
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = fd.readlink().name
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(_address(fields[1]) if table == "tcp" else f"ipv6:{fields[1]}")
    return found


def _address(hex_address: str) -> str:
    ip, port = hex_address.split(":")
    octets = [str(int(ip[i : i + 2], 16)) for i in (6, 4, 2, 0)]  # little-endian u32
    return f"{'.'.join(octets)}:{int(port, 16)}"


class ListenWatcher:
    """Samples, in the background, the listening sockets of the federation in ``home``."""

    def __init__(self, home: Path) -> None:
        self.home, self.addresses, self.stop = str(home.resolve()), set(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            self.addresses |= _listening(processes_with_env(FEDERATION_MARKER, self.home))

    def finish(self) -> set[str]:
        self.stop.set()
        self.thread.join()
        return self.addresses


@pytest.fixture
def home(tmp_path: Path):
    """The run directory; afterwards nothing of its federation may be alive."""
    out = tmp_path / "run"
    yield out
    assert processes_with_env(FEDERATION_MARKER, str((out / "flower").resolve())) == []


def _deploy(out: Path, config: Path, *flags: str, capsys, sets: list[str] = FAST) -> dict:
    watcher = ListenWatcher(out / "flower")
    code = main(["deploy-local", str(config), "--supernodes", "2", "--out", str(out), "--json",
                 "--timeout", "900", *[a for s in sets for a in ("--set", s)], *flags])  # fmt: skip
    listening = watcher.finish()
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    assert listening and all(a.startswith("127.0.0.1:") for a in listening), listening
    return json.loads(captured.out)


def _check_contract(report: dict, tls: bool, auth: bool) -> None:
    assert report["rounds"] == 2 and len(report["accuracy"]) == 2
    assert report["wall_seconds"] > 0 and report["failures"] == []
    assert [c["client_id"] for c in report["clients"]] == [0, 1]
    for client in report["clients"]:
        assert CLIENT_KEYS <= set(client)
        assert client["rounds_participated"] == 2
    deployment = report["deployment"]
    assert (deployment["supernodes"], deployment["tls"], deployment["auth"]) == (2, tls, auth)
    assert deployment["wall_seconds"] > 0
    assert Path(report["run_dir"], "report.json").is_file()


def test_insecure_deployment_end_to_end(home: Path, capsys) -> None:
    report = _deploy(home, QUICKSTART, capsys=capsys)
    _check_contract(report, tls=False, auth=False)
    # the default attack: client 0 in round 1 (every 5th round, in turn), unscored (no oracle)
    attacked = {c["client_id"]: c["attack"] for c in report["clients"]}
    assert attacked[1] is None and attacked[0]["name"] == "strongest"
    assert attacked[0]["ssim"] is None and report["attacks_skipped"] == [[], []]


def test_tls_and_auth_deployment_with_a_per_node_mechanism(home: Path, capsys) -> None:
    config = home.parent / "vmf-node.toml"
    config.write_text(
        QUICKSTART.read_text()
        + '\n[[mechanism.overrides]]\nclients = [1]\nname = "vmf"\nkappa = 1000.0\n'
    )
    report = _deploy(home, config, "--tls", "--auth", capsys=capsys, sets=NO_ATTACKS)
    _check_contract(report, tls=True, auth=True)
    assert [c["mechanism"] for c in report["clients"]] == ["gaussian", "vmf"]
    assert (
        "Uvicorn running on https://127.0.0.1:" in (home / "flower/logs/superlink.log").read_text()
    )


def test_supernode_killed_after_round_1(home: Path) -> None:
    plan = plan_deployment(QUICKSTART, 2, home, NO_ATTACKS)
    killed: list[str] = []
    with Federation(plan.home, 2, node_configs=plan.node_configs) as fed:

        def kill_at_round_2(line: str) -> None:
            if "[ROUND 2/" in line and not killed:
                fed.kill_supernode(1)
                killed.append(line)

        outcome = fed.submit(plan.app_dir, plan.run_config, on_line=kill_at_round_2, timeout=900)
        assert fed.group.procs["supernode-1"].poll() == -9
    assert killed and outcome.ok, outcome
    report = json.loads((home / "report.json").read_text())
    assert report["rounds"] == 2
    assert [f["round"] for f in report["failures"]] == [2]
    participated = {c["client_id"]: c["rounds_participated"] for c in report["clients"]}
    assert participated == {0: 2, 1: 1}


def test_untrusted_or_unregistered_supernodes_cannot_join_and_timeout_stops_a_run(
    home: Path,
) -> None:
    plan = plan_deployment(QUICKSTART, 1, home, ["rounds=50", "audit.attacks=[]"])  # > timeout
    with Federation(plan.home, 1, tls=True, auth=True) as fed:
        other_ca = write_tls_files(home / "other-ca").ca_cert
        rogue_key, _ = write_supernode_key(home / "rogue" / "key")
        ports = free_ports(3)
        cases = {  # index: (trusted root, auth key, expected reason in the log)
            7: (None, fed.keys[0], "CERTIFICATE_VERIFY_FAILED"),  # system trust store
            8: (other_ca, fed.keys[0], "CERTIFICATE_VERIFY_FAILED"),
            9: (fed.ca_cert, rogue_key, "Failed to activate SuperNode"),
        }
        procs = {
            i: fed.start_supernode(i, port, ca=ca, key=key)
            for (i, (ca, key, _)), port in zip(cases.items(), ports, strict=True)
        }
        for i, (_, _, reason) in cases.items():
            assert procs[i].wait(timeout=PATIENCE) != 0
            log = fed.log_tail(f"supernode-{i}", 200)
            assert "Exit Code: 305" in log and reason in log, log
        assert [n["status"] for n in fed.flwr.nodes()] == ["online"]

        with pytest.raises(TimeoutError):
            fed.submit(plan.app_dir, plan.run_config, timeout=45)
        assert fed.group.procs["flwr-run"].poll() is not None
        (run,) = fed.flwr.query("ls")["runs"]  # started within 45 s, then stopped
        assert run["status"].startswith("finished:") and run["status"] != "finished:completed"
