"""The Ray that a fedpriv command starts: under the command's signal handling, and gone,
every process of it, when the command's work ends.

``fedpriv simulate`` (and the sweep's runs) start Ray here before Flower's simulation engine,
which then uses it (Flower's ``RayBackend.init_ray`` leaves a running Ray alone); ``fedpriv
audit --executor ray`` starts it here before its attacks. Two things differ from letting
``ray.init`` be called by those libraries:

* ``ray.init`` replaces the caller's SIGTERM handler with its own (``sys.exit``, Ray 2.55
  ``ray/_private/worker.py``): the handler that was there (fedpriv's,
  :mod:`workflows.interrupts`) is put back;
* ``ray.shutdown`` stops Ray's node processes, but its workers (the ClientApp actors) exit only
  when they next notice, seconds later, orphaned: every process Ray started carries a marker
  in its environment (``FEDPRIV_RAY``, as a deployment's carry ``FEDPRIV_FEDERATION``), and
  those still alive after the shutdown are killed and waited for, so that nothing of the run
  outlives the command.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from workflows.deploy.processes import kill_processes_with_env

__all__ = ["MARKER", "ray_session"]

MARKER = "FEDPRIV_RAY"
"""The environment variable every process of a :func:`ray_session` inherits (a fresh value
per session)."""


@contextmanager
def ray_session(init_args: dict[str, Any], env: Mapping[str, str] | None = None
                ) -> Iterator[None]:
    """Ray started in this process with ``init_args``; when the block ends for any reason (a
    signal included) Ray is shut down and its remaining processes killed (module docstring).

    Ray's workers import what the driver imports: ``PYTHONPATH`` is set to this process's
    ``sys.path`` (then any ``PYTHONPATH`` given), in the environment and in the job's
    ``runtime_env``, as Flower's ``RayBackend.init_ray`` does (Flower 1.42) when it starts Ray
    itself. ``env`` is set in the job's ``runtime_env`` alone: every worker of the job has it,
    on a running cluster too, and this process does not. With ``init_args["address"]`` naming a
    running cluster, nothing of that cluster is killed: its processes do not carry this
    session's marker.
    """
    import ray

    pythonpath = os.pathsep.join(sys.path)
    if os.environ.get("PYTHONPATH"):
        pythonpath = f"{pythonpath}{os.pathsep}{os.environ['PYTHONPATH']}"
    os.environ["PYTHONPATH"] = pythonpath
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM)
    marker = secrets.token_hex(8)
    try:
        os.environ[MARKER] = marker  # only while Ray starts its processes
        try:
            ray.init(runtime_env={"env_vars": {**(env or {}), "PYTHONPATH": pythonpath}},
                     **{"include_dashboard": False, **init_args})
        finally:
            del os.environ[MARKER]
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)
        yield
    finally:
        ray.shutdown()
        kill_processes_with_env(MARKER, marker)
