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
  Gaussian σ = 1, C = 1, 10 clients, 10 rounds), with the auditor's early stop (0.01):
  process-CPU seconds of one strongest attack (every
  member, and which were skipped) and of one tuning (the TV grid on a public shadow, each
  shadow attack at ``min(budget, attacks.tuning.SHADOW_ITERATIONS)``), at the budget itself
  (2,000 iterations; ``--quick``: 100, scaled linearly to the budget as an upper bound, since
  an early stop at a short budget says nothing of a long one), the cost per
  attacked client-round with the tuning shared over the run's attacked client-rounds
  (``tune_scope = "run"``) or over a round's (``"round"``), an attacked round of the default
  schedule (one client, tuned in its round) against the round's budget
  (``audit.round_seconds``), and the whole run's attack time for a few schedules
  (``audit.clients``, ``audit.every``).
* ``tuning_across_rounds``: whether θ moves the tuning (``audit.tune_scope``): the shadow's SSIM
  at every TV weight of the grid from the fresh θ and from θ after 100 SGD steps (lr 4, batch
  32) on other digits, for the quickstart's declaration and for a noiseless one (batch 32, one
  local step), and the weight each picks; each at the shadow budget
  (``attacks.tuning.SHADOW_ITERATIONS``) and at the attack's whole budget, with the CPU seconds
  of both in the same run and what the shorter one's choice scores at the whole budget
  (``cost_ratio``, ``chosen_scores_at_budget``).
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


def _quickstart_view(global_params: Any = None, mechanism: str = "gaussian",
                     local_steps: int = 20, learning_rate: float = 4.0) -> Any:
    import torch

    from attacks import simulate_view

    x, y = _digits(list(range(32)))
    params = {"clip": 1.0, "noise_multiplier": 1.0} if mechanism == "gaussian" else {}
    return simulate_view("paper-mlp", torch.as_tensor(x), torch.as_tensor(y, dtype=torch.int64),
                         local_steps=local_steps, learning_rate=learning_rate,
                         mechanism=mechanism, mechanism_params=params,
                         global_params=global_params)


def _public() -> Any:
    from attacks.estimators.prior import PublicPrior

    px, py = _digits(list(range(1000, 1300)))
    return PublicPrior(px, py)


#: Schedules of the quickstart's 10 clients × 10 rounds: (audit.clients, audit.every).
SCHEDULES = {"rotate every round (the defaults)": ("rotate", 1),
             "rotate every 5th round (the quickstart)": ("rotate", 5),
             "every client-round": ("all", 1), "all clients every 5th round": ("all", 5)}


def cost_per_client_round(iterations: int, budget: int = 2000, clients: int = 10,
                          rounds: int = 10) -> dict[str, Any]:
    """CPU seconds of ``strongest`` and of the tuning at the quickstart's scale (docstring)."""
    from attacks import run_attack
    from attacks.tuning import SHADOW_ITERATIONS, tune
    from fedpriv.audit.config import AuditConfig

    defaults = AuditConfig()
    view, public = _quickstart_view(), _public()
    scale = budget / iterations
    tuning_scale = min(budget, SHADOW_ITERATIONS) / min(iterations, SHADOW_ITERATIONS)
    start = time.process_time()
    result = run_attack("strongest", view, iterations=iterations,
                        early_stop=defaults.early_stop)
    attack = (time.process_time() - start) * scale
    start = time.process_time()
    tune("strongest", view, public, iterations=iterations, seed=0,
         early_stop=defaults.early_stop)
    tuning = (time.process_time() - start) * tuning_scale
    runs = {}
    for label, (who, every) in SCHEDULES.items():
        attacked_rounds = len(range(1, rounds + 1, every))
        per_round = {"all": clients, "rotate": 1}[who]
        runs[label] = {
            "client_rounds": attacked_rounds * per_round,
            "cpu_seconds_tune_per_run": attacked_rounds * per_round * attack + tuning,
            "cpu_seconds_tune_per_round": attacked_rounds * (per_round * attack + tuning),
        }
    return {"iterations_measured": iterations, "budget": budget,
            "scaled_linearly": iterations != budget, "early_stop": defaults.early_stop,
            "strongest_cpu_seconds": attack, "tuning_cpu_seconds": tuning,
            "kept": result.settings["chosen"]["attack"],
            "members": [{"attack": m["attack"], "init": m["options"].get("init"),
                         "residual": m["residual"], "skipped": "skipped" in m}
                        for m in result.settings["members"]],
            "per_client_round_cpu_seconds": {
                "tune_per_run_all_client_rounds": attack + tuning / (clients * rounds),
                "tune_per_round": attack + tuning / clients},
            "attacked_round": {  # the default schedule: one client a round, tuned that round
                "cpu_seconds": attack + tuning, "round_budget_seconds": defaults.round_seconds,
                "within_budget": attack + tuning <= defaults.round_seconds},
            "quickstart_runs": runs}


def _trained(steps: int) -> Any:
    """θ after ``steps`` SGD steps (lr 4, batch 32) on digits 300…939, never the attacked
    batch (0…31) nor the public pool (1000…1299)."""
    import torch
    import torch.nn.functional as F

    from fedpriv.models import build_model

    torch.manual_seed(0)
    model = build_model("paper-mlp", (1, 16, 16), num_classes=10)
    x, y = _digits(list(range(300, 940)))
    xs, ys = torch.as_tensor(x), torch.as_tensor(y, dtype=torch.int64)
    opt = torch.optim.SGD(model.parameters(), lr=4.0)
    for step in range(steps):
        ids = torch.arange(step * 32, step * 32 + 32) % len(xs)
        opt.zero_grad()
        F.cross_entropy(model(xs[ids]), ys[ids]).backward()
        opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


def tuning_across_rounds(iterations: int, steps: int = 100) -> dict[str, Any]:
    """The tuning's grid scores and choice from the fresh θ and a trained one, at the shadow
    budget and at the whole budget ``iterations`` (docstring)."""
    from attacks.tuning import SHADOW_ITERATIONS, tune
    from fedpriv.audit.config import AuditConfig

    early_stop, public = AuditConfig().early_stop, _public()
    trained = _trained(steps)
    declarations = {"quickstart (K 20, lr 4, sigma 1)": {},
                    "noiseless (K 1, lr 0.1)": {"mechanism": "none", "local_steps": 1,
                                                "learning_rate": 0.1}}
    out: dict[str, Any] = {"iterations": iterations,
                           "shadow_iterations": min(iterations, SHADOW_ITERATIONS)}
    for label, kwargs in declarations.items():
        for theta, params in (("fresh", None), (f"after {steps} steps", trained)):
            view, found, cpu = _quickstart_view(params, **kwargs), {}, {}
            for shadow in (SHADOW_ITERATIONS, iterations):
                start = time.process_time()
                found[shadow] = tune("strongest", view, public, iterations=iterations, seed=0,
                                     early_stop=early_stop, shadow_iterations=shadow)
                cpu[shadow] = time.process_time() - start
            short, whole = found[SHADOW_ITERATIONS], found[iterations]
            scores = dict(zip(short.grid, whole.shadow_ssim, strict=True))
            out[f"{label}, {theta}"] = {
                "chosen": short.options["tv_weight"],
                "shadow_ssim": dict(zip(map(str, short.grid), short.shadow_ssim, strict=True)),
                "chosen_at_budget": whole.options["tv_weight"],
                "shadow_ssim_at_budget": {str(k): v for k, v in scores.items()},
                "chosen_scores_at_budget": scores[short.options["tv_weight"]],
                "best_at_budget": max(whole.shadow_ssim),
                "cpu_seconds": cpu[SHADOW_ITERATIONS], "cpu_seconds_at_budget": cpu[iterations],
                "cost_ratio": cpu[iterations] / cpu[SHADOW_ITERATIONS]}
    return out


def _digits(indices: list[int]) -> tuple[Any, Any]:
    from fedpriv.data.datasets import scikit_digits

    x, y = scikit_digits(indices)
    return x.numpy(), y.numpy()


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
        "cost_per_client_round": cost_per_client_round(2 if smoke else 100 if quick else 2000),
        "tuning_across_rounds": tuning_across_rounds(2 if smoke else 100 if quick else 2000,
                                                     2 if smoke else 100),
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
