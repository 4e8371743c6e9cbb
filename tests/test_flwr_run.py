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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process we can read."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            found[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd)
    return found


def _stop_local_superlink(home: Path) -> list[int]:
    """SIGTERM the local SuperLink that ``flwr run`` started detached for ``home`` and every
    process under it (superexec, flwr-simulation, Ray), by id; SIGKILL what is left after
    30 s. Returns the ids still alive (none)."""
    import signal
    import time

    procs = _processes()
    roots = [pid for pid, (_, cmd) in procs.items()
             if "flower-superlink" in cmd and str(home) in cmd]
    tree, grew = set(roots), True
    while grew:
        kids = {pid for pid, (ppid, _) in procs.items() if ppid in tree} - tree
        tree, grew = tree | kids, bool(kids)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in tree:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (tree & set(_processes())):
            time.sleep(0.2)
    return sorted(tree & set(_processes()))


@pytest.mark.slow
def test_flwr_run_prints_the_run_directory_and_epsilon_table_and_refuses_in_one_line(tmp_path):
    """``flwr run`` on Flower's default federation (2 simulated SuperNodes), through
    ``fedpriv flwr-run`` (flwr run --stream with the run's exit code): the quickstart logs its
    run directory, the fewer-clients line and ends with simulate's summary; the adversaries
    preset is refused in one line and exits 1. A local SuperLink on free ports, started with
    runtime dependency installation on (the app's uv sync installs nothing), killed after."""
    home = tmp_path / "flwr-home"
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "FLWR_DISABLE_UPDATE_CHECK": "1",
           "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()),
           "FLWR_LOCAL_CONTROL_API_PORT": str(_free_port())}
    env.pop("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])

    def flwr_run(preset: str, out: Path) -> subprocess.CompletedProcess[str]:
        config = f"config='{preset}' out='{out}' set='rounds=2 audit.attacks=[]'"
        return subprocess.run(
            [sys.executable, "-m", "fedpriv", "flwr-run", ".", "-c", config],
            cwd=ROOT, env={**env, "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "0"},
            capture_output=True, text=True, timeout=500)

    try:
        done = flwr_run("configs/quickstart.toml", tmp_path / "quick")
        log = done.stdout + done.stderr
        assert done.returncode == 0, log[-3000:]
        assert f"fedpriv run directory: {tmp_path / 'quick'}" in log
        assert "names 10 clients (data.num_clients): running with 2" in log
        assert "uv sync took" in log  # installation ran, and installed nothing
        assert "No additional application dependencies needed installation" in log
        summary = log[log.index("fedpriv run summary:"):]
        assert re.search(r"client\s+mechanism\s+rounds\s+epsilon", summary)
        # one log record per line of the table: "INFO strategies.server_app:   1 gaussian 2 …"
        assert re.search(r"server_app:\s+1\s+gaussian\s+2\s+[\d.]+", summary)
        assert "ended finished:completed" in done.stdout

        done = flwr_run("configs/adversaries.toml", tmp_path / "adv")
        log = done.stdout + done.stderr
        assert done.returncode == 1, log[-3000:]
        [refusal] = [line for line in log.splitlines() if "fedpriv refused the run" in line]
        assert "adversary" in refusal and "num-supernodes=10" in refusal
        assert "Traceback" not in log and "TypeError" not in log
        assert "ended finished:failed" in done.stdout
    finally:
        assert _stop_local_superlink(home) == []


def test_fewer_clients_with_a_target_epsilon_names_the_noise_it_calibrates():
    sets = ["mechanism.target_epsilon=8", "rounds=2", "audit.accountant='rdp'"]
    cfg = load_config(None, [*sets, "data.num_clients=10"])
    fitted = load_config(None, [*sets, "data.num_clients=2"])
    line = fewer_clients_line(cfg, fitted, "why", "how")
    before, after = (float(x) for x in re.findall(
        r"mechanism.noise_multiplier ([\d.]+) -> ([\d.]+)", line)[0])
    assert after < before  # each client holds more records: less noise reaches the same target
