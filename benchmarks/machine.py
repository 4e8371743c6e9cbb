"""What machine and which library versions a benchmark ran on, and how loaded it was."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from typing import Any

__all__ = ["LIBRARIES", "load_average", "machine_info", "versions"]

LIBRARIES = ("torch", "flwr", "numpy", "scipy", "dp-accounting", "ray", "opacus")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def versions() -> dict[str, str | None]:
    """Python and library versions (``None`` for a library that is not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def machine_info() -> dict[str, Any]:
    """CPU count and model, RAM, OS, library versions and the load at the start."""
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "ram_gib": _ram_gib(),
        "platform": platform.platform(),
        "versions": versions(),
        "load_average": load_average(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
