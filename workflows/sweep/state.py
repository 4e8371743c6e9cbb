"""The sweep's output directory: what is finished, so an interrupted sweep resumes.

Layout of ``--out DIR``::

    sweep.json            the validated config of the sweep (written first)
    cells/<key>.json      one per finished run (a cell with one seed): the cell and its run row
    cells/<key>.npz       example originals and reconstructions of that run (figure input)
    runs/<key>/           the run's directory (audit store, report.json, ...; with the
                          first-release probe, train/ and probe/ inside)
    results.csv, runs.csv, results.json, study.md, study.html, *.png   rebuilt at the end

Keys are :func:`workflows.sweep.plan.run_key`: ``<cell key>-seed<s>``. A run counts as
finished only once its JSON exists (written atomically, last). Re-running with the same
``--out`` skips finished runs and starts unfinished ones afresh (their partial run directory
is removed); a different config in the same directory is refused.

Several sweep processes may share one ``--out`` (``fedpriv sweep --workers N``): a process
runs a run only after claiming it — creating ``cells/<key>.lock`` exclusively, holding its
host name and process id — and removes the lock when the run ends, finished or not. A lock
whose process is gone (same host) is taken over.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import numpy as np

from fedpriv.atomic import DIR_MODE, atomic_write_bytes
from fedpriv.config import Config
from fedpriv.errors import InputError
from fedpriv.jsonio import dumps
from fedpriv.validate import check_out_dir
from workflows.sweep.plan import Cell

__all__ = ["MANIFEST", "SweepDir"]

MANIFEST = "sweep.json"
_VERSION = 2


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys at which two nested dicts differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(set(old) | set(new))
        return [d for k in keys for d in _differences(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]


class SweepDir:
    """A sweep's output directory, bound to one config (see the module docstring).

    Raises
    ------
    InputError
        (key ``--out``) The directory holds something else than this sweep: a different
        config, or files of no sweep at all.
    """

    def __init__(self, root: Path, cfg: Config) -> None:
        self.root = check_out_dir("--out", root)
        self.cells_dir = self.root / "cells"
        self.runs_dir = self.root / "runs"
        self._claim(json.loads(cfg.to_json()))

    def _claim(self, config: dict[str, Any]) -> None:
        manifest = self.root / MANIFEST
        if manifest.is_file():
            try:
                old = json.loads(manifest.read_text(encoding="utf-8"))["config"]
            except (ValueError, KeyError, TypeError):
                raise InputError("--out", str(self.root),
                                 f"a sweep directory with a readable {MANIFEST}") from None
            diff = _differences(old, config)
            if diff:
                raise InputError("--out", str(self.root), "a new directory, or one holding "
                                 f"the same sweep (this config differs at {', '.join(diff)})")
            return
        if self.root.exists() and any(self.root.iterdir()):
            raise InputError("--out", str(self.root),
                             f"an empty or new directory (it holds files but no {MANIFEST})")
        self.cells_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        self.runs_dir.mkdir(mode=DIR_MODE, exist_ok=True)
        body = {"version": _VERSION, "config": config}
        atomic_write_bytes(manifest, (dumps(body, indent=2) + "\n").encode())

    def _json(self, key: str) -> Path:
        return self.cells_dir / f"{key}.json"

    def images_path(self, key: str) -> Path:
        """Where the example images of cell ``key`` live."""
        return self.cells_dir / f"{key}.npz"

    def is_finished(self, key: str) -> bool:
        """Whether run ``key`` is finished (its record exists; nothing is read)."""
        return self._json(key).is_file()

    def finished(self, key: str) -> dict[str, Any] | None:
        """``{"cell": ..., "row": ...}`` of a finished run, or None."""
        if not self.is_finished(key):
            return None
        return json.loads(self._json(key).read_text(encoding="utf-8"))

    def fresh_run_dir(self, key: str) -> Path:
        """The directory of an unfinished run, emptied of an interrupted attempt."""
        run_dir = self.runs_dir / key
        if run_dir.exists():
            shutil.rmtree(run_dir)
        return run_dir

    def save_images(self, key: str, images: dict[str, np.ndarray] | None) -> None:
        """Keep a run's example images (no file when there are none)."""
        if images is None:
            return
        path = self.images_path(key)
        tmp = path.with_name(f".{path.name}.tmp.npz")
        np.savez_compressed(tmp, **images)
        tmp.replace(path)

    def load_images(self, key: str) -> dict[str, np.ndarray] | None:
        """A finished run's example images, or None."""
        path = self.images_path(key)
        if not path.is_file():
            return None
        with np.load(path) as data:
            return {name: data[name] for name in data.files}

    def _lock(self, key: str) -> Path:
        return self.cells_dir / f"{key}.lock"

    def claim(self, key: str) -> bool:
        """Claim the unfinished run ``key`` for this process; False when another live process
        holds it (or it finished meanwhile)."""
        lock = self._lock(key)
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if _holder_alive(lock):
                    return False
                lock.unlink(missing_ok=True)  # its process is gone: take the run over
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{socket.gethostname()} {os.getpid()}\n")
            if self.is_finished(key):  # finished between the caller's look and now
                self.release(key)
                return False
            return True
        return False

    def release(self, key: str) -> None:
        """Give up the claim on run ``key``."""
        self._lock(key).unlink(missing_ok=True)

    def finish(self, key: str, cell: Cell, row: dict[str, Any]) -> None:
        """Mark run ``key`` of ``cell`` finished (atomically; the last thing a run writes)."""
        body = {"cell": cell.as_dict(), "row": row}
        atomic_write_bytes(self._json(key), (dumps(body, indent=2) + "\n").encode())


def _holder_alive(lock: Path) -> bool:
    """Whether the process named in ``lock`` still runs (a lock of another host, or one being
    written, counts as alive)."""
    try:
        host, pid = lock.read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return True
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True
