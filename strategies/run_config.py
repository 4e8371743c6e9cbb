"""Turn Flower run config (``flwr run . -c ...``) into a fedpriv config and output directory.

Run-config keys (``[tool.flwr.app.config]`` in pyproject.toml):

* ``config`` — a fedpriv TOML preset; a relative path is read from the app's directory;
* ``set`` — overrides as in ``fedpriv simulate --set``, separated by spaces or semicolons,
  e.g. ``-c 'set="rounds=3 mechanism.name=vmf"'``;
* ``out`` — the run directory. It must be absolute, because the ServerApp's working directory
  is the SuperLink's; empty means ``~/fedpriv-runs/<timestamp>``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedpriv.config import Config, load_config
from fedpriv.errors import InputError
from strategies.config import CARRIED_SECTIONS

__all__ = ["APP_DIR", "resolve_run_config"]

APP_DIR = Path(__file__).resolve().parents[1]


def resolve_run_config(run_config: Mapping[str, Any]) -> tuple[Config, Path]:
    """``(config, run_dir)`` from Flower run config."""
    preset = Path(str(run_config.get("config", "configs/quickstart.toml")))
    if not preset.is_absolute():
        preset = APP_DIR / preset
    overrides = [s for s in re.split(r"[;\s]+", str(run_config.get("set", "")).strip()) if s]
    cfg = load_config(preset, overrides, carried=CARRIED_SECTIONS)
    out = str(run_config.get("out", "")).strip()
    if not out:
        run_dir = Path.home() / "fedpriv-runs" / time.strftime("run-%Y%m%d-%H%M%S")
    elif not Path(out).is_absolute():
        raise InputError("out", out, "an absolute path (the ServerApp runs in the SuperLink's "
                         "working directory)")
    else:
        run_dir = Path(out)
    return cfg, run_dir
