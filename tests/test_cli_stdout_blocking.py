"""``--json`` writes the whole object even when a library left stdout non-blocking.

The pipe a command writes to is one open file shared with every process that inherited it;
once any of them sets it non-blocking, a write to a full pipe is cut short — silently, with
exit status 0 (a resumed run's object was cut at 131,072 bytes). The child below keeps its
stdout non-blocking from a thread while it writes 300 kB; the parent starts reading only once
the pipe is full or the child has exited, so a cut write would show.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import termios
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import importlib, os, sys, threading, types
cli = importlib.import_module("workflows.cli.main")
fake = types.ModuleType("workflows.cli.fake")
def register(sub):
    sub.add_parser("fake").add_argument("--json", action="store_true")
def keep_non_blocking():  # as a library's thread may, while the result is written
    while True:
        os.set_blocking(1, False)
def run(args):
    os.set_blocking(1, False)
    threading.Thread(target=keep_non_blocking, daemon=True).start()
    return {"blob": "x" * 300_000}
fake.register, fake.run = register, run
sys.modules["workflows.cli.fake"] = fake
cli.SUBCOMMANDS["fake"] = "fake"
sys.exit(cli.main(["fake", "--json"]))
"""


def _queued(fd: int) -> int:
    size = array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, size)
    return size[0]


def test_a_json_result_is_written_whole_to_a_full_pipe():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and _queued(proc.stdout.fileno()) < 65_536:
            if time.monotonic() > deadline:  # a smaller pipe: read anyway
                break
            time.sleep(0.01)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out) == {"blob": "x" * 300_000}
