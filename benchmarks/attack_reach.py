"""How far IGA reaches: SSIM by batch size and mechanism, against the attacker's prior.

The batch-size reach table of docs/leakage.md: IGA (analytic labels, TV 0.2, one restart) on
the paper MLP at a fresh initialisation (seed 0), the first B scikit-learn digits upsampled to
16×16, batch B ∈ {1, 8, 32, 128}, one local step, mechanisms ``none``, ``clip`` (C = 1) and
Gaussian σ ∈ {0.1, 0.3, 1} (C = 1). Beside each score, two prior baselines that use no update:
the public mean image (the mean of digits 1000…1796, never in a batch) for every image, and
the public mean image of each image's true class (what an attacker knowing the labels would
return); ``gain`` is the attack's SSIM minus the mean-image baseline. Scores are the mean SSIM
over the true batch after minimum-cost matching (privacy-math.md §7).

    python benchmarks/attack_reach.py [--quick] [--iterations N] [--markdown]
"""

from __future__ import annotations

import argparse
import json
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
PUBLIC = slice(1000, None)  # the public pool of the priors: never in a batch here


def _baselines(images: Any, labels: Any, pool: Any, pool_labels: Any) -> dict[str, float]:
    """Mean SSIM of the public mean image and of the true class's public mean image
    (:class:`attacks.estimators.prior.PublicPrior`, the baselines the live scoring uses)."""
    import numpy as np

    from attacks.estimators.prior import PublicPrior
    from attacks.scoring import image_ssim

    public = PublicPrior(pool, pool_labels)
    return {
        "prior_mean_ssim": float(np.mean([image_ssim(public.mean, x) for x in images])),
        "prior_class_mean_ssim": float(np.mean([image_ssim(public.class_mean(int(y)), x)
                                                for x, y in zip(images, labels, strict=True)])),
    }


def cell(batch: int, mechanism: str, iterations: int) -> dict[str, Any]:
    """One cell of the table: IGA's scores and the prior baselines."""
    import torch
    from sklearn.datasets import load_digits

    from attacks import run_attack, simulate_view
    from attacks.scoring import score_reconstruction
    from fedpriv.data.datasets import upsample_digits

    bunch = load_digits()
    x = upsample_digits(bunch.images[:batch])
    y = torch.as_tensor(bunch.target[:batch], dtype=torch.int64)
    name, params = MECHANISMS[mechanism]
    view = simulate_view("paper-mlp", x, y, mechanism=name, mechanism_params=params, seed=0)
    start = time.perf_counter()
    result = run_attack("iga", view, iterations=iterations, seed=0)
    seconds = time.perf_counter() - start
    score = score_reconstruction(result.reconstructions, x.numpy(),
                                 recovered_labels=result.labels,
                                 true_labels=y.numpy()).summary()
    pool = upsample_digits(bunch.images[PUBLIC]).numpy()
    prior = _baselines(x.numpy(), y.numpy(), pool, bunch.target[PUBLIC])
    return {
        "batch": batch, "mechanism": mechanism, "ssim": score["ssim"], "psnr": score["psnr"],
        "label_accuracy": score["label_accuracy"], **prior,
        "gain_ssim": score["ssim"] - prior["prior_mean_ssim"], "seconds": round(seconds, 2),
    }  # fmt: skip


def measure(quick: bool = False, *, smoke: bool = False,
            iterations: int | None = None) -> dict[str, Any]:
    """The table (``smoke``: batch 1 and 2 under ``none`` and Gaussian σ = 1, 5 iterations —
    it runs every part, it measures nothing); ``iterations`` overrides the size's count."""
    import torch

    torch.set_num_threads(1)
    iterations = iterations or (5 if smoke else 300 if quick else 1000)
    batches = (1, 2) if smoke else BATCHES
    mechanisms = ("none", "gaussian 1") if smoke else tuple(MECHANISMS)
    rows = [cell(b, m, iterations) for b in batches for m in mechanisms]
    return {"rows": rows, "attack": "iga", "iterations": iterations, "restarts": 1,
            "model": "paper-mlp", "data": "sklearn digits 16x16", "threads": 1}


def markdown(result: dict[str, Any]) -> str:
    """The table as docs/leakage.md shows it: SSIM (gain over the mean-image prior)."""
    rows = result["rows"]
    mechanisms = list(dict.fromkeys(r["mechanism"] for r in rows))
    lines = ["| batch | " + " | ".join(mechanisms) + " | prior: mean image | prior: class mean |",
             "|---" * (len(mechanisms) + 3) + "|"]
    for batch in dict.fromkeys(r["batch"] for r in rows):
        cells = {r["mechanism"]: r for r in rows if r["batch"] == batch}
        first = next(iter(cells.values()))
        lines.append(f"| {batch} | " + " | ".join(
            f"{cells[m]['ssim']:.2f} ({cells[m]['gain_ssim']:+.2f})" for m in mechanisms)
            + f" | {first['prior_mean_ssim']:.2f} | {first['prior_class_mean_ssim']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 iterations instead of 1000")
    parser.add_argument("--iterations", type=int, help="IGA iterations (default 1000)")
    parser.add_argument("--markdown", action="store_true", help="print the docs table too")
    args = parser.parse_args()
    result = measure(args.quick, iterations=args.iterations)
    print(json.dumps(result))
    if args.markdown:
        print(markdown(result))


if __name__ == "__main__":
    main()
