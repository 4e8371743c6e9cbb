"""Speed of the gradient-inversion attacks on the paper MLP, and time to a good reconstruction.

``python benchmarks/attack_speed.py [--quick] [--threads N]`` prints one JSON object:

* ``iterations_per_second``: IGA and DLG at batch 1 and 8 (scikit-learn digits upsampled to
  16×16, fresh paper MLP, mechanism ``none``), the budget divided by the median wall time of
  ``repeats`` runs after one warm-up run, per wall second and per process-CPU second (the
  latter is steadier on a shared machine); one torch thread (``run_attack`` enforces it).
* ``time_to_ssim_0.9``: for the batch-1 digit demo, per attack setting, the smallest iteration
  budget in a grid whose run reaches SSIM ≥ 0.9 (skimage SSIM after matching) and that run's
  median wall time; averaged over a few digits. The budget, not a stopping rule, is the unit,
  because IGA's learning-rate schedule depends on the budget.
* ``cost_per_client_round``: ``audit.attacks = ["strongest"]`` and ``audit.tune = "public"``
  at the quickstart's scale (configs/quickstart.toml: batch 32, 20 local steps at lr 4,
  Gaussian σ = 1, C = 1, 10 clients, 10 rounds): process-CPU seconds of one strongest attack
  (every member) and of one tuning (the TV grid on a public shadow, shared by the clients that
  declare alike) at a few iterations, scaled linearly to ``audit.iterations`` (2,000; the cost
  of an iteration does not depend on the budget), and the whole run's attack time on one core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

BUDGETS = (5, 10, 15, 20, 30, 40, 60, 80, 120, 160, 240, 320)
SETTINGS: dict[str, tuple[str, dict[str, Any]]] = {
    "iga_tv=1e-4 (default)": ("iga", {}),
    "iga_tv=0.2 (reference)": ("iga", {"tv_weight": 0.2}),
    "dlg": ("dlg", {}),
    "idlg": ("idlg", {}),
}


def _view(indices: list[int], seed: int) -> tuple[Any, Any]:
    import torch

    from attacks import simulate_view

    x, y = _digits(indices)
    view = simulate_view("paper-mlp", torch.as_tensor(x), torch.as_tensor(y, dtype=torch.int64),
                         seed=seed)
    return view, x


def _median_run(name: str, view: Any, iterations: int, repeats: int, options: dict) -> Any:
    """First result, median wall seconds and median CPU seconds of ``repeats`` runs."""
    from attacks import run_attack

    runs, cpu = [], []
    for _ in range(repeats):
        start = time.process_time()
        runs.append(run_attack(name, view, iterations=iterations, **options))
        cpu.append(time.process_time() - start)
    return runs[0], statistics.median(r.seconds for r in runs), statistics.median(cpu)


def iterations_per_second(iterations: int, repeats: int) -> dict[str, dict[str, float]]:
    """Iterations per wall second and per CPU second of IGA and DLG at batch 1 and 8."""
    wall, cpu = {}, {}
    for batch in (1, 8):
        view, _ = _view(list(range(batch)), seed=0)
        for name in ("iga", "dlg"):
            _median_run(name, view, 5, 1, {})  # warm-up
            _, seconds, cpu_seconds = _median_run(name, view, iterations, repeats, {})
            wall[f"{name}_batch{batch}"] = iterations / seconds
            cpu[f"{name}_batch{batch}"] = iterations / cpu_seconds
    return {"wall": wall, "cpu": cpu}


def _time_to_ssim(name: str, options: dict, index: int, repeats: int,
                  budgets: tuple[int, ...]) -> dict[str, Any]:
    from attacks import score_reconstruction

    view, truth = _view([index], seed=index)
    best = 0.0
    for budget in budgets:
        result, seconds, _ = _median_run(name, view, budget, repeats, options)
        ssim = score_reconstruction(result.reconstructions, truth).summary()["ssim"]
        best = max(best, ssim)
        if ssim >= 0.9:
            return {"iterations": budget, "seconds": seconds, "ssim": ssim}
    return {"iterations": None, "seconds": None, "ssim": best}


def time_to_ssim(
    digits: list[int], repeats: int, budgets: tuple[int, ...] = BUDGETS
) -> dict[str, dict[str, Any]]:
    """Per setting: median budget (the first of ``budgets`` that reaches it) and seconds to
    SSIM 0.9 over ``digits`` (None if never)."""
    out = {}
    for label, (name, options) in SETTINGS.items():
        runs = [_time_to_ssim(name, options, index, repeats, budgets) for index in digits]
        reached = [r for r in runs if r["iterations"] is not None]
        out[label] = {
            "reached": f"{len(reached)}/{len(runs)}",
            "median_iterations": _median([r["iterations"] for r in reached]),
            "median_seconds": _median([r["seconds"] for r in reached]),
            "max_ssim_if_not_reached": [r["ssim"] for r in runs if r["iterations"] is None],
        }
    return out


def cost_per_client_round(iterations: int, budget: int = 2000, clients: int = 10,
                          rounds: int = 10) -> dict[str, Any]:
    """CPU seconds of ``strongest`` and of the tuning at the quickstart's scale (docstring)."""
    import torch

    from attacks import run_attack, simulate_view
    from attacks.estimators.prior import PublicPrior
    from attacks.tuning import tune

    x, y = _digits(list(range(32)))
    view = simulate_view("paper-mlp", torch.as_tensor(x), torch.as_tensor(y, dtype=torch.int64),
                         local_steps=20,
                         learning_rate=4.0, mechanism="gaussian",
                         mechanism_params={"clip": 1.0, "noise_multiplier": 1.0})
    px, py = _digits(list(range(1000, 1300)))
    public = PublicPrior(px, py)
    start = time.process_time()
    run_attack("strongest", view, iterations=iterations)
    attack = (time.process_time() - start) * budget / iterations
    start = time.process_time()
    tune("strongest", view, public, iterations=iterations, seed=0)
    tuning = (time.process_time() - start) * budget / iterations
    return {"iterations_measured": iterations, "budget": budget,
            "strongest_cpu_seconds": attack, "tuning_cpu_seconds_per_round": tuning,
            "quickstart_run_cpu_hours": (clients * rounds * attack + rounds * tuning) / 3600}


def _digits(indices: list[int]) -> tuple[Any, Any]:
    import numpy as np
    from sklearn.datasets import load_digits

    from fedpriv.data.datasets import upsample_digits

    bunch = load_digits()
    return upsample_digits(bunch.images[indices]).numpy(), np.asarray(bunch.target[indices])


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def measure(quick: bool = False, threads: int = 1, *, smoke: bool = False) -> dict[str, Any]:
    """All measurements; see the module docstring (``smoke``: 5 iterations, one digit, one
    budget — it runs every part, it measures nothing)."""
    import torch

    torch.set_num_threads(threads)
    iterations, repeats = (5, 1) if smoke else (50, 3) if quick else (200, 5)
    digits = [0] if smoke else [0, 13, 26] if quick else [0, 13, 26, 39, 52]
    return {
        "iterations_per_second": iterations_per_second(iterations, repeats),
        "time_to_ssim_0.9": time_to_ssim(digits, 1 if quick or smoke else 3,
                                         BUDGETS[:1] if smoke else BUDGETS),
        "cost_per_client_round": cost_per_client_round(2 if smoke else 20 if quick else 100),
        "model": "paper-mlp",
        "data": "sklearn digits 16x16",
        "iterations": iterations,
        "repeats": repeats,
        "attack_threads": 1,
        "torch": torch.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations and repeats")
    parser.add_argument("--threads", type=int, default=1, help="torch threads outside attacks")
    args = parser.parse_args()
    print(json.dumps(measure(args.quick, args.threads)))


if __name__ == "__main__":
    main()
