"""Where the main thread's CPU time goes, by sampling its stack (no profiler, no dependency).

A CPU-time interval timer (``setitimer(ITIMER_PROF)``: the process's user and system time, so
other jobs on a shared machine do not skew it) interrupts the main thread every ``interval``
seconds of CPU; the signal handler charges the current stack to one owner, looking from the
innermost frame outwards:

* ``dp_step`` — the stack is inside ``fedpriv.training.local_train`` (the client's local DP
  step: batch sampling, per-example gradients, clipping, noise, the parameter update);
* ``flower`` — the innermost frame that belongs to Flower (or Ray) or to fedpriv's code is
  Flower's: message and record building, (de)serialising arrays, FedAvg's aggregation;
* ``store`` / ``attack`` / ``fedpriv`` — that frame is fedpriv's: the audit store
  (``fedpriv/audit``, ``fedpriv/atomic.py``), the attacks (``attacks/``), or the rest
  (ClientApp, auditor, ledger, reply check, report);
* ``evaluation`` — the server's evaluation of the global model (once per round, not per client);
* ``grid`` — the in-process Grid of the tests (a loop handing messages over);
* ``other`` — none of these (the interpreter between calls).

NumPy, torch, SQLite and the standard library are charged to whoever called them. Python runs
the handler between bytecodes, so a sample falling inside a long C call is taken when the call
returns, in its caller's frame — the owner is still right (the method of pyinstrument). A thread
polling ``sys._current_frames()`` instead was biased here: it gets the GIL mostly while torch
has released it, and overstated the DP step by a fifth. Each sample costs ~10 µs.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from types import FrameType

__all__ = ["OWNERS", "StackSampler", "classify"]

ROOT = Path(__file__).resolve().parent.parent
OWNERS = ("dp_step", "flower", "fedpriv", "store", "attack", "evaluation", "grid", "other")
_DP_STEP = (str(ROOT / "fedpriv" / "training" / "dpsgd.py"), "local_train")


def _owner_of_file(path: str) -> str | None:
    if "/flwr/" in path or "/ray/" in path:
        return "flower"
    if not path.startswith(str(ROOT)):
        return None
    relative = path[len(str(ROOT)) + 1 :]
    if relative.startswith("tests/"):
        return "grid"
    if relative.startswith(("fedpriv/audit/", "fedpriv/atomic.py")):
        return "store"
    if relative.startswith("attacks/"):
        return "attack"
    if relative == "strategies/evaluation.py":
        return "evaluation"
    if relative.startswith(("fedpriv/", "clients/", "strategies/")):
        return "fedpriv"
    return None


def classify(frame: FrameType | None) -> str:
    """The owner of one sample (module docstring)."""
    owner = None
    while frame is not None:
        code = frame.f_code
        if (code.co_filename, code.co_name) == _DP_STEP:
            return "dp_step"
        if owner is None:
            owner = _owner_of_file(code.co_filename)
        frame = frame.f_back
    return owner or "other"


class StackSampler:
    """Count the main thread's samples by owner while :attr:`active` is true (call
    :meth:`start` and :meth:`stop` from the main thread)."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.active = False

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        if self.active:
            self.counts[classify(frame)] += 1

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, signal.SIG_DFL)

    def shares(self) -> dict[str, float]:
        """Fraction of the sampled time charged to each owner."""
        total = sum(self.counts.values()) or 1
        return {owner: round(self.counts[owner] / total, 4) for owner in OWNERS}
