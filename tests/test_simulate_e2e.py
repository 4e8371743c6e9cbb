"""The quickstart as a user runs it: `fedpriv simulate` on Flower's Ray backend, then the
contract of its JSON and of report.json. Kept small (3 clients, 2 rounds) for the default run.
Each command runs in a session of its own that is stopped when it ends, timed out or not
(:func:`process_support.run_in_session`): nothing of its Ray outlives the test."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from process_support import run_in_session

ROOT = Path(__file__).parents[1]
CLIENT_KEYS = {
    "client_id", "mechanism", "rounds_participated", "epsilon", "delta", "log_bayes_capacity",
    "mbp_bound", "mbp_estimate", "abp_estimate", "attack",
}  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    """Flower's home in the test's directory; this interpreter's scripts (``flwr`` starts
    ``flower-superlink`` from PATH) first on PATH, whether or not the venv is activated."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "FLWR_HOME": str(tmp_path / "flwr"), "PATH": path}


def test_quickstart_simulation_reports_every_client(tmp_path):
    out = tmp_path / "run"
    proc = run_in_session(
        [sys.executable, "-m", "fedpriv", "simulate", "configs/quickstart.toml", "--out", str(out),
         "--set", "rounds=2", "--set", "data.num_clients=3", "--set", "train.local_steps=2",
         "--set", "audit.attacks=[]", "--json"],  # no attack: the default attacks a client a round
        cwd=ROOT, timeout=600, env=_env(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert json.loads((out / "report.json").read_text())["clients"] == result["clients"]
    assert result["rounds"] == 2 and len(result["accuracy"]) == 2
    assert all(0.0 <= a <= 1.0 for a in result["accuracy"])
    assert [c["client_id"] for c in result["clients"]] == [0, 1, 2]
    for client in result["clients"]:
        assert CLIENT_KEYS <= set(client)
        assert client["mechanism"] == "gaussian" and client["rounds_participated"] == 2
        # two rounds of two Gaussian releases each: a finite epsilon and capacity that grew
        assert 0 < client["epsilon"] < float("inf")
        rounds = client["per_round"]
        assert rounds[1]["log_capacity_cumulative"] > rounds[0]["log_capacity_cumulative"] > 0
        assert rounds[1]["epsilon"] > rounds[0]["epsilon"] > 0
        # the Gaussian has no pure (LDP) parameter, so no finite MBP/ABP bound
        assert all(r["mbp_bound"] == r["abp_bound"] == "inf" for r in rounds)
    assert result["wall_seconds"] > 0 and result["status"] == "completed"
    assert "rounds" in proc.stderr  # the per-round progress bar goes to stderr


@pytest.mark.slow
def test_flwr_run_runs_the_same_app(tmp_path):
    """`flwr run .` (Flower's own runner, local simulation SuperLink) writes the same report;
    the detached SuperLink it starts is stopped here."""
    env = {**_env(tmp_path), "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
           "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}  # fmt: skip
    out = tmp_path / "flwr-run"
    flwr = Path(sys.executable).with_name("flwr")
    try:
        proc = run_in_session(
            [str(flwr), "run", ".", "--stream", "--federation-config",
             "num-supernodes=3 client-resources-num-cpus=1 init-args-num-cpus=2", "-c",
             f"config='configs/quickstart.toml' out='{out}' "
             "set='rounds=2 data.num_clients=3 train.local_steps=2'"],
            cwd=ROOT, timeout=600, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        report = json.loads((out / "report.json").read_text())
        assert report["status"] == "completed" and len(report["accuracy"]) == 2
        assert len(report["clients"]) == 3
        # the default attack ran through flwr run too: client 0 in round 1, unscored
        assert [c["attack"]["name"] if c["attack"] else None for c in report["clients"]] == [
            "strongest", None, None]
    finally:
        subprocess.run(["pkill", "-f", f"flower-superlink.*{tmp_path}"], check=False)


@pytest.mark.slow
def test_plain_flwr_run_fits_flowers_default_federation(tmp_path):
    """`flwr run .` with Flower's default federation (2 simulated SuperNodes; the quickstart
    names 10 clients) runs with 2 clients (about 35 s here), and its log prints each line once,
    names the config instead of dumping it, and says how to run the preset as written."""
    env = {**_env(tmp_path), "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
           "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": "39291"}  # fmt: skip
    out = tmp_path / "flwr-plain"
    flwr = Path(sys.executable).with_name("flwr")
    try:
        proc = run_in_session(
            [str(flwr), "run", ".", "--stream", "-c",
             f"out='{out}' set='rounds=3 audit.attacks=[]'"],
            cwd=ROOT, timeout=120, env=env,
        )  # fmt: skip
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, log[-3000:]
        report = json.loads((out / "report.json").read_text())
        assert report["status"] == "completed" and len(report["clients"]) == 2
        assert "num-supernodes=10" in log and "INFO:flwr" not in log
        assert '"audit": {' not in log  # the config is named, not printed
    finally:
        pids = subprocess.run(["pgrep", "-f", f"flower-superlink.*{tmp_path}"],
                              capture_output=True, text=True).stdout.split()
        for pid in pids:
            os.kill(int(pid), 15)


def test_simulated_clients_draw_from_the_run_seed_the_server_redraws(tmp_path):
    """``fedpriv simulate`` opts its Ray workers in to the run seed's stream
    (``FEDPRIV_REPRODUCIBLE_NOISE`` in the job's environment; a deployment's clients keep their
    noise secret): under the oracle every client declares it and the server's re-draw of the
    committed noise agrees."""
    from reliability_support import verdict_leaf

    from fedpriv.audit import AuditStore
    from fedpriv.seeding import REPRODUCIBLE_NOISE_ENV

    out = tmp_path / "run"
    env = {k: v for k, v in _env(tmp_path).items() if k != REPRODUCIBLE_NOISE_ENV}
    proc = run_in_session(
        [sys.executable, "-m", "fedpriv", "simulate", "configs/quickstart.toml", "--out", str(out),
         "--set", "rounds=1", "--set", "data.num_clients=2", "--set", "train.local_steps=1",
         "--set", "audit.ground_truth=true", "--set", "audit.attacks=[]"],
        cwd=ROOT, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    with AuditStore.open(out, readonly=True) as store:
        rows = store.query("SELECT verification_json FROM tallies "
                           "WHERE verification_json IS NOT NULL")
    committed = [verdict_leaf(json.loads(r["verification_json"]), "committed-noise")
                 for r in rows]
    assert len(committed) == 2 and all(c["status"] == "consistent" for c in committed), committed
