"""How far the strongest attack reaches: SSIM by batch size, mechanism and local steps, against
the attacker's two priors.

The batch-size reach table of docs/leakage.md: ``strongest`` (every applicable attack — the
analytic first-layer attack, DLG, iDLG, IGA from random images and IGA from the analytic
images — keeping the least float64 matching residual, no ground truth; one restart, IGA's TV
weight fixed at its default 1e-4, no public tuning, the auditor's default early stop 0.01) on
the paper MLP at a fresh initialisation (seed 0), the first B scikit-learn digits upsampled to
16×16, batch B ∈ {1, 8, 32, 128}, K ∈ {1, 5, 20} local SGD steps at lr 0.1 (replayed inside
the matcher), mechanisms ``none``, ``clip`` (C = 1) and Gaussian σ ∈ {0.1, 0.3, 1} (C = 1).
Each cell is scored by the live scoring (:func:`strategies.attack_schedule.attack_scores`, the
public data digits 1000…1796, never in a batch): the mean SSIM over the true batch after
minimum-cost matching (privacy-math.md §7), its gain over the *no-update prior* (the public
mean image: what the attacker has before any update; total leakage) and over the *label
prior* (the public class means of the labels the attack recovered from the update; leakage
beyond the labels), the SSIM on the digits' support, the member kept, and the within-class
identification score: each true image among 49 public look-alikes of its class,
``log(M·P̂)`` with the lower end of its 95 % Clopper–Pearson interval beside the bound
``min(log C, log M)`` of the round's release on those candidates (privacy-math.md §13).

    python benchmarks/attack_reach.py [--quick] [--iterations N] [--steps 1,5,20] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

BATCHES = (1, 8, 32, 128)
MECHANISMS = {
    "none": ("none", {}),
    "clip": ("clip", {"clip": 1.0}),
    "gaussian 0.1": ("gaussian", {"clip": 1.0, "noise_multiplier": 0.1}),
    "gaussian 0.3": ("gaussian", {"clip": 1.0, "noise_multiplier": 0.3}),
    "gaussian 1": ("gaussian", {"clip": 1.0, "noise_multiplier": 1.0}),
}
STEPS = (1, 5, 20)
ATTACK = "strongest"
EARLY_STOP = 0.01  # the auditor's default (audit.early_stop)
PUBLIC = slice(1000, None)  # the public pool of the priors: never in a batch here


def cell(batch: int, mechanism: str, iterations: int, steps: int = 1) -> dict[str, Any]:
    """One cell of the table: the strongest attack's scores against both priors, the member it
    kept and its identification score."""
    import math

    from attacks import run_attack, simulate_view
    from attacks.estimators.prior import Identification, PublicPrior
    from fedpriv.data.datasets import scikit_digits
    from strategies.attack_schedule import attack_scores

    x, y = scikit_digits(slice(batch))
    name, params = MECHANISMS[mechanism]
    view = simulate_view("paper-mlp", x, y, mechanism=name, mechanism_params=params, seed=0,
                         local_steps=steps)
    start = time.process_time()
    result = run_attack(ATTACK, view, iterations=iterations, seed=0, early_stop=EARLY_STOP)
    seconds = time.process_time() - start
    kept = result.settings["chosen"]
    public_x, public_y = scikit_digits(PUBLIC)
    public = PublicPrior(public_x.numpy(), public_y.numpy())
    row, _ = attack_scores(result, x.numpy(), y.numpy(), public, view)
    prior, found = row["prior"], row["estimate"]["identification"]
    log_c = found["log_capacity"]
    leak = Identification(found["successes"], found["trials"], found["candidates"]).leakage(
        math.inf if log_c is None else log_c)
    return {
        "batch": batch, "mechanism": mechanism, "steps": steps, "ssim": row["ssim"],
        "psnr": row["psnr"], "kept": kept["attack"] + (
            " from analytic" if kept["options"].get("init") == "analytic" else ""),
        "residual": kept["residual"],
        "support_ssim": row["estimate"]["support_ssim"],
        "label_accuracy": row["label_accuracy"],
        "no_update_prior_ssim": prior["no_update"]["ssim"],
        "no_update_gain_ssim": prior["no_update_gain"]["ssim"],
        "label_prior_ssim": prior["ssim"], "label_gain_ssim": row["gain_ssim"],
        "identification": {**found, "log_value": leak.log_value, "log_lower": leak.log_lower,
                           "log_bound": leak.log_bound},
        "cpu_seconds": round(seconds, 2),
    }  # fmt: skip


def measure(quick: bool = False, *, smoke: bool = False, iterations: int | None = None,
            steps: tuple[int, ...] = STEPS) -> dict[str, Any]:
    """The table (``smoke``: batch 1 and 2 under ``none`` and Gaussian σ = 1, one and two
    local steps, 5 iterations — it runs every part, it measures nothing; ``quick``: 100
    iterations, K = 1 only); ``iterations`` overrides the size's count (default 500)."""
    import torch

    torch.set_num_threads(1)
    iterations = iterations or (5 if smoke else 100 if quick else 500)
    batches = (1, 2) if smoke else BATCHES
    mechanisms = ("none", "gaussian 1") if smoke else tuple(MECHANISMS)
    steps = (1, 2) if smoke else (1,) if quick else steps
    rows = []
    for k in steps:
        for b in batches:
            for m in mechanisms:
                rows.append(cell(b, m, iterations, k))
                if not smoke:  # progress: a long recording keeps what it measured
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {"rows": rows, "attack": ATTACK, "iterations": iterations, "restarts": 1,
            "early_stop": EARLY_STOP, "tv_weight": 1e-4, "tune": "off", "local_lr": 0.1,
            "model": "paper-mlp", "data": "sklearn digits 16x16", "threads": 1}


def _log(value: float | None) -> str:
    return "−∞" if value is None else f"{value:+.2f}".replace("-", "−")


def _log_mp(successes: int | None, found: dict[str, Any]) -> float | None:
    """``log(M·P̂)`` of ``successes`` of the score's trials (None at 0)."""
    import math

    if not successes:
        return None
    return math.log(found["candidates"] * successes / found["trials"])


def markdown(result: dict[str, Any]) -> str:
    """The tables as docs/leakage.md shows them, per number of local steps K: SSIM (gain over
    the no-update prior / over the label prior) and the member kept, the priors per batch; then
    the identification score per cell, ``log(M·P̂)`` [lower end] against its bound, and the
    label prior's ``log(M·P̂)`` with the same look-alikes."""
    lines: list[str] = []
    for steps in dict.fromkeys(r.get("steps", 1) for r in result["rows"]):
        rows = [r for r in result["rows"] if r.get("steps", 1) == steps]
        mechanisms = list(dict.fromkeys(r["mechanism"] for r in result["rows"]))
        batches = list(dict.fromkeys(r["batch"] for r in rows))
        lines += [f"K = {steps}:", "",
                  "| batch | " + " | ".join(mechanisms) + " | no-update prior | label prior |",
                  "|---" * (len(mechanisms) + 3) + "|"]
        for batch in batches:
            cells = {r["mechanism"]: r for r in rows if r["batch"] == batch}
            first = next(iter(cells.values()))
            lines.append(f"| {batch} | " + " | ".join(
                f"{cells[m]['ssim']:.2f} ({cells[m]['no_update_gain_ssim']:+.2f} / "
                f"{cells[m]['label_gain_ssim']:+.2f}) {_short(cells[m]['kept'])}"
                if m in cells else "–" for m in mechanisms)
                + f" | {first['no_update_prior_ssim']:.2f} | {first['label_prior_ssim']:.2f} |")
        lines += ["", "| batch | " + " | ".join(mechanisms) + " |",
                  "|---" * (len(mechanisms) + 1) + "|"]
        for batch in batches:
            cells = {r["mechanism"]: r["identification"] for r in rows if r["batch"] == batch}
            lines.append(f"| {batch} | " + " | ".join(
                f"{_log(c['log_value'])} [{_log(c['log_lower'])}] ≤ {c['log_bound']:.2f}; "
                f"label prior {_log(_log_mp(c['prior_successes'], c))}"
                if c is not None else "–" for c in (cells.get(m) for m in mechanisms)) + " |")
        lines.append("")
    return "\n".join(lines)


def _short(kept: str) -> str:
    """The kept member, abbreviated for the table."""
    return {"analytic": "A", "iga": "I", "iga from analytic": "IA", "dlg": "D",
            "idlg": "iD"}.get(kept, kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 iterations, K = 1 only")
    parser.add_argument("--iterations", type=int, help="iterations per member (default 500)")
    parser.add_argument("--steps", default="1,5,20", help="local steps K, comma-separated")
    parser.add_argument("--markdown", action="store_true", help="print the docs table too")
    args = parser.parse_args()
    result = measure(args.quick, iterations=args.iterations,
                     steps=tuple(int(k) for k in args.steps.split(",")))
    print(json.dumps(result))
    if args.markdown:
        print(markdown(result))


if __name__ == "__main__":
    main()
