"""SIGINT and SIGTERM for every fedpriv command: the first stops the work, the second exits
(docs/reliability.md, "Ctrl-C and SIGTERM"; issue 41, item 1).

:func:`install_handlers` (called by the command line for every command, and by
:class:`workflows.deploy.processes.ProcessGroup`) puts one handler on both signals, whatever
the process inherited: a process started from a shell's background job begins with SIGINT
ignored, which Python keeps, so ``kill -INT`` would otherwise do nothing.

* The first signal raises :class:`KeyboardInterrupt` in the main thread. The commands unwind
  as they do on Ctrl-C: ``fedpriv simulate`` stops Flower's simulation engine and Ray, makes
  the ServerApp thread give up its round (:func:`workflows.flower_queue.stop_pulls`), marks the
  run ``interrupted`` and writes its report; process groups stop their children
  (:mod:`workflows.deploy.processes`).
* A second signal ends the process at once (``os._exit``, exit status 128 + the signal):
  nothing more runs in it. Ray's node processes die with it (Ray's kernel fate-sharing), as
  do the direct children of a process group (``PR_SET_PDEATHSIG``).

``ray.init`` replaces the SIGTERM handler of the process that calls it with its own
(``sys.exit``), so fedpriv starts Ray itself (:func:`workflows.ray_session.ray_session`) and
puts the handler back after.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

__all__ = ["Interrupted", "exit_status", "install_handlers"]

_received: list[int] = []  # the signals received, in order


class Interrupted(KeyboardInterrupt):
    """A command stopped by a signal (or Ctrl-C) after it cleaned up.

    Parameters
    ----------
    resume
        The command that continues the work, printed by the command line (None: none).
    """

    def __init__(self, resume: str | None = None) -> None:
        super().__init__(resume)
        self.resume = resume


def _on_signal(signum: int, frame: Any) -> None:
    if _received:
        os.write(2, f"fedpriv: second {signal.Signals(signum).name}: exiting now\n".encode())
        os._exit(128 + signum)
    _received.append(signum)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install_handlers() -> None:
    """Handle SIGINT and SIGTERM as the module docstring says: the first raises
    :class:`KeyboardInterrupt` in the main thread, the second exits at once. Installed
    explicitly, even over an inherited SIG_IGN; again after anything replaced them. A no-op
    outside the main thread (Python sets handlers only there)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


def exit_status() -> int:
    """The exit status of an interrupted command: 128 + the signal received (130 for Ctrl-C
    delivered as Python's own KeyboardInterrupt)."""
    return 128 + (_received[0] if _received else signal.SIGINT)
