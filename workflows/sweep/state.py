"""The sweep's output directory: what is finished, so an interrupted sweep resumes.

Layout of ``--out DIR``::

    sweep.json            the validated config of the sweep (written first)
    cells/<key>.json      one per finished cell: the calibrated cell and its result row
    cells/<key>.npz       example originals and reconstructions of that cell (figure input)
    runs/<key>/           the cell's run directory (audit store, report.json, ...)
    results.csv, results.json, study.md, study.html, *.png   rebuilt at the end of every sweep

A cell counts as finished only once its JSON exists (written atomically, last). Re-running
with the same ``--out`` skips finished cells and starts unfinished ones afresh (their partial
run directory is removed); a different config in the same directory is refused.
"""

from __future__ import annotations

import json
import shutil
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
_VERSION = 1


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

    def finished(self, key: str) -> dict[str, Any] | None:
        """``{"cell": ..., "row": ...}`` of a finished cell, or None."""
        path = self._json(key)
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def fresh_run_dir(self, key: str) -> Path:
        """The run directory of an unfinished cell, emptied of an interrupted attempt."""
        run_dir = self.runs_dir / key
        if run_dir.exists():
            shutil.rmtree(run_dir)
        return run_dir

    def save_images(self, key: str, images: dict[str, np.ndarray] | None) -> None:
        """Keep a cell's example images (no file when there are none)."""
        if images is None:
            return
        path = self.images_path(key)
        tmp = path.with_name(f".{path.name}.tmp.npz")
        np.savez_compressed(tmp, **images)
        tmp.replace(path)

    def load_images(self, key: str) -> dict[str, np.ndarray] | None:
        """A finished cell's example images, or None."""
        path = self.images_path(key)
        if not path.is_file():
            return None
        with np.load(path) as data:
            return {name: data[name] for name in data.files}

    def finish(self, cell: Cell, row: dict[str, Any]) -> None:
        """Mark ``cell`` finished (atomically; the last thing a cell writes)."""
        body = {"cell": cell.as_dict(), "row": row}
        atomic_write_bytes(self._json(cell.key), (dumps(body, indent=2) + "\n").encode())
