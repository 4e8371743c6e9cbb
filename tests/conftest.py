"""Shared test settings: one torch thread, Flower offline; a SIGTERM ends a session as Ctrl-C
does (``finally`` blocks and fixture finalisers run), and network namespaces left by a killed
session are removed when a session starts and ends (``process_support``)."""

import os
import signal
import sys

import pytest
import torch
from process_support import remove_leftover_namespaces

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
torch.set_num_threads(1)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_sessionstart(session):
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    _report(remove_leftover_namespaces(ours=False), "a session that is no longer running")


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session, exitstatus):
    _report(remove_leftover_namespaces(ours=True), "this session")


def _report(names: list[str], whose: str) -> None:
    if names:
        print(f"\nremoved network namespaces left by {whose}: {', '.join(names)}", file=sys.stderr)
