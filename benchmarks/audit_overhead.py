"""What auditing adds to an in-process round: auditing off and on, interleaved, in one run.

``python -m benchmarks.audit_overhead [--quick]`` prints one JSON object (``benchmarks/run.py
--sections audit_overhead`` records it with the machine's facts). The workload is the scaling
benchmark's (:mod:`benchmarks.scaling`: paper MLP, batch 16, one local step, Gaussian σ = 1,
the real ServerApp body on the in-process :class:`workflows.local_grid.LocalGrid`), with
``audit`` meaning every reply checked against its declaration, tallied and recorded (no update
arrays stored, no attacks). For 10, 100 and 1,000 clients it runs ``off`` and ``audit``
alternately (off, audit, off, audit, …: a change of load falls on both), each in its own
subprocess, and reports per setting the **CPU seconds per round** (this process's user + system
time between the ends of rounds 2…R: other jobs on a shared machine barely move it) beside the
wall seconds, and the ratios audit / off of both — the ratio of the pooled medians and the
median of the per-pair ratios. Then 10,000 clients, off then audited (issue #30: ≤ 20 s per
round on 2 cores; issue #37: audit ≤ 1.10× off), with the ratio of their CPU seconds.

Up to 1,000 clients the data are the scikit-learn digits (1,437 records) unless Fashion-MNIST
is installed (``benchmarks.scaling.data_sets``); 10,000 clients need ~60,000 records: without
Fashion-MNIST a *stand-in* of its shape is written once into the benchmark cache (seeded
uniform pixels and labels, 60,000 + 10,000 records of 28 × 28 in the IDX format): a round's
cost depends on the shapes, not on the pixels; the result says which data ran.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.scaling import CACHE, FASHION, data_sets, inprocess_once
from benchmarks.timing import summarize

__all__ = ["PLAN_CLIENTS", "fashion_or_stand_in", "measure"]

PLAN_CLIENTS = (10, 100, 1000)
STAND_IN = CACHE / "fashion-mnist-stand-in"


def _write_idx(path: Path, array: np.ndarray) -> None:
    """An IDX file of unsigned bytes (the MNIST distribution's format)."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">i", d) for d in array.shape)
    part = path.with_name(path.name + ".part")
    part.write_bytes(header + array.astype(np.uint8).tobytes())
    part.replace(path)


def fashion_or_stand_in() -> list[str]:
    """``--set`` keys of Fashion-MNIST: the installed one, else the stand-in (module
    docstring), written once."""
    if FASHION.is_dir():
        return data_sets()
    rng = np.random.default_rng(30)
    STAND_IN.mkdir(parents=True, exist_ok=True)
    for prefix, count in (("train", 60_000), ("t10k", 10_000)):
        images = STAND_IN / f"{prefix}-images-idx3-ubyte"
        labels = STAND_IN / f"{prefix}-labels-idx1-ubyte"
        pixels, classes = rng.integers(0, 256, size=(count, 28, 28)), rng.integers(0, 10, count)
        if not (images.is_file() and labels.is_file()):
            _write_idx(images, pixels)
            _write_idx(labels, classes)
    return ["data.name='fashion-mnist'", f"data.root='{STAND_IN}'"]


def _pooled(rows: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    values = [x for r in rows for x in r.get(key) or []]
    return summarize(values, digits=4) if values else None


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    return round(a["median"] / b["median"], 3) if a and b and b["median"] > 0 else None


def _setting(runs: list[dict[str, Any]], clients: int) -> dict[str, Any]:
    """Pooled rounds of every off and audit run at ``clients``, and the ratios."""
    off = [r for r in runs if r["clients"] == clients and r["mode"] == "off"]
    audit = [r for r in runs if r["clients"] == clients and r["mode"] == "audit"]
    out: dict[str, Any] = {}
    for mode, rows in (("off", off), ("audit", audit)):
        out[mode] = {"runs": len(rows), "cpu_s": _pooled(rows, "round_cpu_spacings"),
                     "wall_s": _pooled(rows, "round_spacings"),
                     "errors": [r["error"][-300:] for r in rows if r.get("error")]}
    pairs = [_ratio((a.get("round_cpu_seconds")), (o.get("round_cpu_seconds")))
             for o, a in zip(off, audit, strict=False)]
    pairs = [p for p in pairs if p is not None]
    cpu_off, cpu_audit = out["off"]["cpu_s"], out["audit"]["cpu_s"]
    out["ratio_cpu"] = _ratio(cpu_audit, cpu_off)
    out["ratio_cpu_pairs_median"] = round(statistics.median(pairs), 3) if pairs else None
    out["ratio_wall"] = _ratio(out["audit"]["wall_s"], out["off"]["wall_s"])
    if cpu_off and cpu_audit:
        out["audit_ms_per_client"] = round(
            1e3 * (cpu_audit["median"] - cpu_off["median"]) / clients, 4)
    shares = [r.get("per_client_ms") for r in audit if r.get("per_client_ms")]
    out["audit_per_client_ms_by_owner"] = shares[-1] if shares else None
    return out


def measure(quick: bool = False, *, smoke: bool = False, pairs_part: bool = True,
            large_part: bool = True) -> dict[str, Any]:
    """The interleaved plan (module docstring; ``quick``: 2 pairs, 10,000 clients for 2
    rounds; ``smoke``: one pair of 2 clients and a 20-client audited run, 2 rounds each;
    ``pairs_part`` / ``large_part``: run the off/audit pairs, the large audited run)."""
    if smoke:
        clients_plan, pairs, rounds, large, large_rounds = (2,), 1, 2, 20, 2
    else:
        clients_plan, pairs, rounds = PLAN_CLIENTS, 2 if quick else 3, 4
        large, large_rounds = 10_000, 2 if quick else 3
    runs = []
    for _ in range(pairs if pairs_part else 0):
        for clients in clients_plan:
            for mode in ("off", "audit"):
                runs.append(inprocess_once(clients, mode, rounds))
                _say(runs[-1])
    big_sets = fashion_or_stand_in()
    big = {"clients": large, "mode": "audit", "skipped": True}
    big_off = {"clients": large, "mode": "off", "skipped": True}
    if large_part:
        big_off = inprocess_once(large, "off", large_rounds, data=big_sets)
        _say(big_off)
        big = inprocess_once(large, "audit", large_rounds, data=big_sets)
        _say(big)
    return {
        "data": data_sets(), "data_10000": big_sets,
        "stand_in": not FASHION.is_dir(),
        "rounds": rounds, "pairs": pairs,
        "settings": {str(c): _setting(runs, c) for c in clients_plan},
        "large": {"clients": large, "rounds": large_rounds,
                  "cpu_s": big.get("round_cpu_seconds"), "wall_s": big.get("round_seconds"),
                  "per_client_ms": big.get("per_client_ms"), "peak_pss_mib": big.get(
                      "peak_pss_mib"), "error": big.get("error"),
                  "off_cpu_s": big_off.get("round_cpu_seconds"),
                  "ratio_cpu": _ratio(big.get("round_cpu_seconds"),
                                      big_off.get("round_cpu_seconds"))},
        "runs": runs + ([big_off, big] if large_part else []),
    }


def _say(row: dict[str, Any]) -> None:
    cpu = (row.get("round_cpu_seconds") or {}).get("median")
    wall = (row.get("round_seconds") or {}).get("median")
    print(f"[audit_overhead] {row['clients']} {row['mode']}: {cpu} CPU s / {wall} s per round "
          f"{row.get('error', '')[-200:]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 pairs; 10,000 clients 2 rounds")
    parser.add_argument("--smoke", action="store_true", help="the smallest sizes")
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--pairs-only", action="store_true", help="no 10,000-client run")
    part.add_argument("--large-only", action="store_true", help="only the 10,000-client run")
    args = parser.parse_args()
    print(json.dumps(measure(args.quick, smoke=args.smoke, pairs_part=not args.large_only,
                             large_part=not args.pairs_only)))
