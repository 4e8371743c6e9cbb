"""What one run of the Fashion-MNIST study costs, part by part (``configs/paper-fmnist.toml``).

``python benchmarks/paper_cell.py [--quick]`` prints one JSON object:

* ``train_seconds``: 3 epochs of DP-SGD (AdamW, the paper MLP, Gaussian σ = 1.23 and VMF
  κ = 75) over 60,000 records at each batch size — the client's whole local training in one
  run, in-process (no Flower). Real Fashion-MNIST when Debian's files are installed, random
  16×16 images otherwise (the cost does not depend on the pixels);
* ``iga_ms_per_iteration``: IGA on a first release at each batch size (the attack reconstructs
  L images), wall and process-CPU milliseconds per iteration, one torch thread, and the
  seconds 10,000 iterations take at that rate;
* ``simulation_overhead_seconds`` (not with ``--quick``): the wall time of a one-client,
  one-round, one-step ``simulate`` run without attack — Ray start-up, the client actor's
  imports and data loading, shutdown — which every run pays twice (training and probe).

The sum is a run's cost on an idle machine; ``runs.csv`` of a sweep holds the measured ones.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEBIAN = "/usr/share/datasets/fashion-mnist"
BATCHES = (16, 32, 64, 128)
RECORDS = 60_000


def _data(records: int = RECORDS) -> tuple[Any, Any, str]:
    import torch

    from fedpriv.data import load_dataset

    if Path(DEBIAN, "train-images-idx3-ubyte.gz").is_file():
        ds = load_dataset("fashion-mnist", DEBIAN)
        return ds.train_x[:records], ds.train_y[:records], "fashion-mnist"
    g = torch.Generator().manual_seed(0)
    return torch.rand(records, 1, 16, 16, generator=g), torch.randint(0, 10, (records,),
                                                                      generator=g), "random"


def train_seconds(
    batches: tuple[int, ...], records: int = RECORDS
) -> dict[str, dict[str, float]]:
    """Seconds of 3 epochs of local DP-SGD over ``records`` records per mechanism and batch
    size."""
    import torch

    from fedpriv.mechanisms import build_mechanism
    from fedpriv.models import build_model
    from fedpriv.training import LocalOptimizer, local_train

    x, y, _ = _data(records)
    out: dict[str, dict[str, float]] = {}
    for name, params in (("gaussian", {"noise_multiplier": 1.23}), ("vmf", {"kappa": 75.0})):
        mech = build_mechanism(name, {**params, "clip": 1.0})
        for batch in batches:
            model = build_model("paper-mlp", (1, 16, 16))
            start = time.perf_counter()
            local_train(model, x, y, mech, lr=0.005, local_steps=math.ceil(3 * len(x) / batch),
                        batch_size=batch, sampling="poisson",
                        generator=torch.Generator().manual_seed(1),
                        optimizer=LocalOptimizer("adamw", weight_decay=0.1))
            out.setdefault(name, {})[f"L{batch}"] = round(time.perf_counter() - start, 2)
    return out


def iga_ms(batches: tuple[int, ...], iterations: int) -> dict[str, dict[str, float]]:
    """IGA milliseconds per iteration (wall and CPU) at each batch size."""
    from attacks import run_attack, simulate_view

    x, y, _ = _data(max(batches))
    out = {}
    for batch in batches:
        view = simulate_view("paper-mlp", x[:batch], y[:batch], seed=0)
        run_attack("iga", view, iterations=5)  # warm-up
        cpu = time.process_time()
        result = run_attack("iga", view, iterations=iterations, seed=0)
        cpu = time.process_time() - cpu
        wall = 1e3 * result.seconds / iterations
        out[f"L{batch}"] = {"wall_ms": round(wall, 3), "cpu_ms": round(1e3 * cpu / iterations, 3),
                            "seconds_for_10000": round(wall * 10, 1)}
    return out


def simulation_overhead(start_ray: bool = True) -> float:
    """Wall seconds of a one-client, one-round, one-step run without attack (``start_ray``
    false, the smoke run: only :func:`workflows.simulation.check_runnable`, what ``simulate``
    checks before Ray starts; the ``simulation`` and ``scaling`` sections start Ray through the
    same ``simulate``, behind ``fedpriv simulate``)."""
    from workflows.config import load_config
    from workflows.simulation import check_runnable, simulate

    root = Path(__file__).resolve().parents[1]
    overrides = ["rounds=1", "train.local_steps=1", "sweep.epochs=1"]
    if not Path(DEBIAN, "train-images-idx3-ubyte.gz").is_file():
        overrides += ["data.name=digits"]
    cfg = load_config(root / "configs" / "paper-fmnist-quick.toml", overrides)
    if not start_ray:
        start = time.perf_counter()
        check_runnable(cfg)
        return round(time.perf_counter() - start, 1)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        try:
            simulate(cfg, Path(tmp) / "run")
        finally:  # the Ray that Flower started in this process, even if the run failed
            import ray

            if ray.is_initialized():
                ray.shutdown()
        return round(time.perf_counter() - start, 1)


def measure(quick: bool = False, *, smoke: bool = False) -> dict[str, Any]:
    """All measurements; see the module docstring (``smoke``: batch 16 only, 3 epochs of 64
    records, 5 IGA iterations, the simulation checked but not started: it measures nothing)."""
    import torch

    torch.set_num_threads(1)
    batches = (16,) if smoke else (16, 128) if quick else BATCHES
    records = 64 if smoke else RECORDS
    out: dict[str, Any] = {
        "data": _data(records)[2],
        "train_seconds": train_seconds(batches, records),
        "iga_ms_per_iteration": iga_ms(batches, 5 if smoke else 100 if quick else 300),
        "torch_threads": 1,
    }
    if smoke or not quick:
        out["simulation_overhead_seconds"] = simulation_overhead(start_ray=not smoke)
    return out


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, as a script
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two batch sizes, fewer iterations")
    parser.add_argument("--smoke", action="store_true", help="smallest sizes: runs, no timing")
    args = parser.parse_args()
    print(json.dumps(measure(args.quick, smoke=args.smoke)))


if __name__ == "__main__":
    main()
