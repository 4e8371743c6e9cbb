"""Issue #29's ablation: which difference between fedpriv's Fashion-MNIST protocol and Biswas et
al.'s (arXiv 2502.04045, Table V) moves the accuracies, one factor at a time.

Accuracy only, so no Flower and no attack: centralised DP-SGD exactly as the sweep's single
client runs it — the same library calls (:func:`fedpriv.training.local_train`, the registry's
mechanism and model, :class:`~fedpriv.training.optimizers.LocalOptimizer`, the seeded generator)
— on the 60,000 training images, scored on the 10,000 test images. One run of 3 epochs at batch
128 takes ~3 s on one core. ::

    python -m benchmarks.paper_ablation --variants base,std,std+vmf-layers --seeds 0,1,2 \\
        --out runs/ablation.jsonl                      # appends; runs already there are skipped
    python -m benchmarks.paper_ablation --table runs/ablation.jsonl   # the tables of study.md

A variant is factors joined by ``+``: ``base`` (the recorded protocol: bilinear resize to
16×16, pixels in [0, 1], Poisson batches, AdamW with decoupled decay 0.1, flat clipping at C = 1,
one VMF over the whole gradient), ``std`` (inputs standardised by the training images' mean
and standard deviation), ``half`` (inputs in [−1, 1]), ``antialias`` / ``antialias-std`` /
``antialias-half`` (antialiased resize), ``vmf-layers`` (one VMF per layer, κ on each),
``clip-layers`` (per-layer clipping, C_r = 1/√3) or ``clip-layers1`` (C_r = 1), ``fixed``
(shuffled fixed-size batches), ``adam`` (Adam with coupled L2 decay 0.1). Needs Fashion-MNIST
(``/usr/share/datasets/fashion-mnist``, or ``--root``).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention
from scipy import stats

__all__ = ["CELLS", "FACTOR_PAIRS", "PUBLISHED", "factor_table", "run", "specs", "tables"]

CELLS: list[tuple[str, str, dict[str, float]]] = [
    ("none", "no noise", {}),
    *[("gaussian", f"σ {s:g}", {"noise_multiplier": s}) for s in (1.23, 0.66, 0.461, 0.204)],
    *[("vmf", f"κ {k}", {"kappa": float(k)}) for k in (75, 150, 200, 250, 400)],
]
"""Table V's cells (mechanism, column label, parameters), and κ = 200 of the batch-size study."""
PUBLISHED = dict(zip([c[1] for c in CELLS if c[1] != "κ 200"],
                     (0.8471, 0.7489, 0.7879, 0.7980, 0.8204, 0.4495, 0.4592, 0.5227, 0.6003),
                     strict=True))
"""Biswas et al., Table V (Fashion-MNIST, batch 128): test accuracy per cell."""
LAYER_DIMS = [12_800, 750, 150]
PREPS = ("bilinear", "std", "half", "antialias", "antialias-std", "antialias-half")
FACTORS = ("base", "vmf-layers", "clip-layers", "clip-layers1", "fixed", "adam", *PREPS[1:])


def _variant(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Mechanism parameters and run settings of a variant (module docstring)."""
    params: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for part in name.split("+"):
        if part not in FACTORS:
            raise SystemExit(f"--variants: unknown factor {part!r}; allowed: {', '.join(FACTORS)}")
        if part == "vmf-layers":
            params.update(vmf_layers="per-layer", vmf_layer_dims=LAYER_DIMS)
        elif part in ("clip-layers", "clip-layers1"):
            params["clip_per_layer"] = [round(1 / math.sqrt(3), 6) if part == "clip-layers"
                                        else 1.0] * 3
        elif part == "fixed":
            extra["sampling"] = "fixed"
        elif part == "adam":
            extra["opt"] = "adam"
        elif part in PREPS:
            extra["prep"] = part
    return params, extra


def specs(variants: list[str], seeds: list[int], batches: list[int],
          cells: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Every run of ``variants × seeds × batches × cells`` (labels of :data:`CELLS`; by
    default Table V's nine)."""
    for name in variants:
        params, extra = _variant(name)
        for batch in batches:
            for seed in seeds:
                for mech, label, cell in CELLS:
                    if label not in (PUBLISHED if cells is None else cells):
                        continue
                    own = {k: v for k, v in params.items() if mech == "vmf"
                           or not k.startswith("vmf_")}
                    if mech == "none":
                        own.pop("clip_per_layer", None)
                    yield {"variant": name, "cell": label, "mech": mech,
                           "params": {**cell, **own}, "seed": seed, "batch": batch, **extra}


def _images(raw: Any, prep: str) -> torch.Tensor:
    x = torch.as_tensor(raw, dtype=torch.float32).unsqueeze(1) / 255.0
    return F.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False,
                         antialias=prep.startswith("antialias")).clamp_(0.0, 1.0)


def _data(root: Path, prep: str, cache: dict) -> tuple[torch.Tensor, ...]:
    """Training and test images and labels, prepared as ``prep`` says (kept per ``prep``)."""
    from fedpriv.data.idx import find_idx_set, read_idx

    if prep not in cache:
        files = find_idx_set(root)
        if files is None:
            raise SystemExit(f"--root: no Fashion-MNIST IDX files in {root} "
                             "(apt-get install dataset-fashion-mnist)")
        raw = {k: read_idx(p) for k, p in files.items()}
        train, test = (_images(raw[k], prep) for k in ("train_images", "test_images"))
        if prep.endswith("std"):
            mean, std = train.mean(), train.std()
            train, test = (train - mean) / std, (test - mean) / std
        elif prep.endswith("half"):
            train, test = train * 2 - 1, test * 2 - 1
        labels = [torch.as_tensor(raw[k], dtype=torch.int64)
                  for k in ("train_labels", "test_labels")]
        cache[prep] = (train, labels[0], test, labels[1])
    return cache[prep]


def run(spec: dict[str, Any], root: Path, cache: dict, epochs: float = 3.0,
        limit: int | None = None) -> dict[str, Any]:
    """One run: train from the seeded initial model, return the spec with its test accuracy
    (``limit``: the first ``limit`` training records only, for the smoke test)."""
    from fedpriv.mechanisms import build_mechanism
    from fedpriv.models.registry import build_model
    from fedpriv.seeding import make_generator
    from fedpriv.training import local_train
    from fedpriv.training.optimizers import LocalOptimizer

    x, y, test_x, test_y = _data(root, spec.get("prep", "bilinear"), cache)
    if limit is not None:
        x, y = x[:limit], y[:limit]
    seed, batch = spec["seed"], spec["batch"]
    torch.manual_seed(seed)
    model = build_model("paper-mlp", (1, 16, 16))
    mechanism = build_mechanism(spec["mech"], {"clip": 1.0, **spec["params"]})
    optimizer = LocalOptimizer(spec.get("opt", "adamw"), 0.0, False, 0.1)
    started = time.time()
    local_train(model, x, y, mechanism, lr=0.005, local_steps=math.ceil(epochs * len(x) / batch),
                batch_size=batch, sampling=spec.get("sampling", "poisson"),
                generator=make_generator(seed, 0, 1), optimizer=optimizer)
    with torch.no_grad():
        accuracy = float((model(test_x).argmax(1) == test_y).float().mean())
    return {**spec, "acc": accuracy, "secs": round(time.time() - started, 1)}


def _interval(values: list[float]) -> str:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.3f}"
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.3f} ± {half:.3f}"


def tables(rows: list[dict[str, Any]]) -> str:
    """Markdown: per variant and batch size, each cell's mean accuracy ± the half-width of a
    95% Student-t interval over seeds, and how many cells lie within 0.03 of Table V."""
    acc: dict[tuple[str, int, str], dict[int, float]] = collections.defaultdict(dict)
    for r in rows:
        acc[(r["variant"], r["batch"], r["cell"])][r["seed"]] = r["acc"]
    present = {c for _, _, c in acc}
    labels = [c[1] for c in CELLS if c[1] in present]
    out = ["| variant | L | seeds | " + " | ".join(labels) + " | within 0.03 |",
           "|" + " --- |" * (len(labels) + 4),
           "| published (Table V) | 128 | | "
           + " | ".join(f"{PUBLISHED[c]:.4f}" if c in PUBLISHED else "–" for c in labels)
           + " | |"]
    for variant, batch in dict.fromkeys((v, b) for v, b, _ in acc):
        cells = [acc.get((variant, batch, c), {}) for c in labels]
        seeds = max(len(c) for c in cells)
        near = sum(1 for c, v in zip(labels, cells, strict=True)
                   if v and batch == 128 and c in PUBLISHED
                   and abs(statistics.fmean(v.values()) - PUBLISHED[c]) <= 0.03)
        shown = [_interval(list(v.values())) if v else "–" for v in cells]
        out.append(f"| {variant} | {batch} | {seeds} | " + " | ".join(shown)
                   + f" | {near if batch == 128 else '–'} |")
    return "\n".join(out)


FACTOR_PAIRS = [
    ("vmf-layers", "base", "per-layer VMF (κ on every layer)"),
    ("clip-layers", "base", "per-layer clipping, C_r = 1/√3"),
    ("clip-layers1", "base", "per-layer clipping, C_r = 1"),
    ("adam", "base", "coupled decay (Adam, weight decay 0.1)"),
    ("fixed", "base", "fixed-size batches (no Poisson)"),
    ("antialias", "base", "antialiased resize"),
    ("half", "base", "inputs in [−1, 1]"),
    ("std", "base", "standardised inputs"),
    ("antialias-std", "std", "antialiased resize, standardised"),
    ("std+vmf-layers", "std", "per-layer VMF, standardised"),
    ("std+clip-layers", "std", "per-layer clipping (1/√3), standardised"),
    ("std+fixed", "std", "fixed batches, standardised"),
]
"""``(variant, reference, what changes)``: the factors of study.md's ablation table."""


def factor_table(rows: list[dict[str, Any]], batch: int = 128) -> str:
    """Markdown: each factor's accuracy change against its reference per cell, paired by seed
    (the same initial model, batches and noise stream), mean ± 95% t-interval over seeds."""
    acc: dict[tuple[str, str], dict[int, float]] = collections.defaultdict(dict)
    for r in rows:
        if r["batch"] == batch:
            acc[(r["variant"], r["cell"])][r["seed"]] = r["acc"]
    labels = list(PUBLISHED)
    out = ["| factor | against | seeds | " + " | ".join(labels) + " |",
           "|" + " --- |" * (len(labels) + 3)]
    for variant, reference, what in FACTOR_PAIRS:
        shown, counts = [], set()
        for c in labels:
            ours, theirs = acc.get((variant, c), {}), acc.get((reference, c), {})
            diffs = [ours[s] - theirs[s] for s in sorted(set(ours) & set(theirs))]
            counts.add(len(diffs))
            shown.append("–" if not diffs else
                         f"{'+' if statistics.fmean(diffs) >= 0 else ''}{_interval(diffs)}")
        out.append(f"| {what} | {reference} | {max(counts)} | " + " | ".join(shown) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="base,std")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--batches", default="128")
    parser.add_argument("--cells", help="comma-separated column labels (default: Table V's nine)")
    parser.add_argument("--root", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--out", type=Path, help="JSON lines to append to")
    parser.add_argument("--table", type=Path, nargs="+", help="print the tables of these files")
    args = parser.parse_args(argv)
    if args.table:
        rows = [json.loads(line) for f in args.table for line in f.open() if line.strip()]
        print(tables(rows) + "\n\n" + factor_table(rows))
        return 0
    if args.out is None:
        parser.error("--out is required to run")
    done = set()
    if args.out.exists():
        done = {json.dumps({k: v for k, v in json.loads(line).items() if k not in ("acc", "secs")},
                           sort_keys=True) for line in args.out.open() if line.strip()}
    cache: dict = {}
    todo = [s for s in specs(args.variants.split(","), [int(s) for s in args.seeds.split(",")],
                             [int(b) for b in args.batches.split(",")],
                             args.cells.split(",") if args.cells else None)
            if json.dumps(s, sort_keys=True) not in done]
    for i, spec in enumerate(todo, 1):
        row = run(spec, args.root, cache)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{i}/{len(todo)}] {json.dumps(row)}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
