"""Shared test settings: one torch thread, Flower offline; a SIGTERM ends a session as Ctrl-C
does (``finally`` blocks and fixture finalisers run), and network namespaces left by a killed
session are removed when a session starts and ends (``process_support``). ``--cpu-load N``
runs the session with N CPU-bound processes competing for the cores."""

import os
import signal
import sys

import pytest
import torch
from process_support import cpu_load, remove_leftover_namespaces

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
torch.set_num_threads(1)


_LOAD = []  # the session's busy processes (a ProcessGroup), with --cpu-load


def pytest_addoption(parser):
    parser.addoption("--cpu-load", type=int, default=0, metavar="N",
                     help="run the session with N CPU-bound processes competing with the tests "
                     "for the cores, as on a loaded machine (stopped when the session ends)")


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_sessionstart(session):
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    _report(remove_leftover_namespaces(ours=False), "a session that is no longer running")
    count = session.config.getoption("--cpu-load")
    if count > 0:
        _LOAD.append(cpu_load(count))


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session, exitstatus):
    for group in _LOAD:
        group.stop_all()
    _report(remove_leftover_namespaces(ours=True), "this session")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    count = config.getoption("--cpu-load")
    if count > 0:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        terminalreporter.write_line(f"--cpu-load {count}: {count} busy processes competed "
                                    f"with the tests; load average now {load}")


def _report(names: list[str], whose: str) -> None:
    if names:
        print(f"\nremoved network namespaces left by {whose}: {', '.join(names)}", file=sys.stderr)
