"""The two priors of a recorded sweep's attacked batches, recomputed without re-running it.

The no-update prior uses no update and the label prior only the labels
(:mod:`attacks.estimators.prior`), so given the labels they depend only on the true images
attacked and on the public data, not on the mechanism: every cell of a sweep with
``sweep.attack_on = "first-release"`` attacks, for a given seed, the same batch — the first
Poisson batch of client 0 in round 1 (:func:`workflows.sweep.plan.cell_config`). This script
draws that batch by the clients' own code path (:func:`clients.local_data.client_data`, the
generator of :func:`fedpriv.seeding.make_generator` for (seed, client 0, round 1) and
:func:`fedpriv.training.sample_batch`, the first draw of that generator in
:func:`fedpriv.training.local_train`) and scores the baselines against it with the live
scoring's functions: the public set of :func:`strategies.attack_schedule.public_prior` (the
server's evaluation split), :func:`attacks.estimators.prior.prior_baseline` and
:func:`attacks.scoring.pair_scores`. The label prior is given the TRUE labels: the recorded
studies do not keep the labels the attack recovered, so it is what the live scoring gives
with perfect label recovery, an upper reference.

``--batches N`` adds N other Poisson batches of the same expected size drawn from the
training split with a separate seeded generator: the mean and standard error of the baselines
over them say whether the attacked batches are typical.

    python benchmarks/study_prior.py configs/paper-fmnist.toml --set "sweep.batch_sizes=[128]"
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attacks.estimators.prior import ATTAINABLE, PublicPrior, prior_baseline  # noqa: E402
from attacks.scoring import pair_scores  # noqa: E402
from fedpriv.errors import InputError  # noqa: E402
from workflows.config import Config, config_from_dict, load_config  # noqa: E402

__all__ = ["attacked_batch", "baseline_scores", "study_priors"]

ATTACKED_CLIENT, ATTACKED_ROUND = 0, 1
OTHER_BATCHES_SEED = 12345


def attacked_batch(cfg: Config, seed: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The true images and labels of the release a first-release probe attacks: client 0's
    first batch of round 1 in the run of ``cfg`` with ``seed`` at expected size ``batch_size``."""
    from clients.local_data import client_data
    from fedpriv.seeding import make_generator
    from fedpriv.training import sample_batch

    x, y, _ = client_data(cfg.data, seed, ATTACKED_CLIENT, cfg.data.num_clients)
    generator = make_generator(seed, ATTACKED_CLIENT, ATTACKED_ROUND)
    idx = sample_batch(len(x), batch_size, cfg.train.sampling, generator)
    return x[idx].numpy(), y[idx].numpy()


def baseline_scores(images: np.ndarray, labels: np.ndarray,
                    public: PublicPrior) -> dict[str, dict[str, Any]]:
    """Mean MSE, PSNR and SSIM of the no-update prior (``no_update``) and the label prior
    (``label``, from ``labels``) against ``images``, and ``reference``: the label prior, as
    scored live."""
    base = prior_baseline(images, labels, public)
    truth = np.clip(np.asarray(images, np.float64), 0.0, 1.0)
    out: dict[str, dict[str, Any]] = {}
    for name in ATTAINABLE:
        scores = pair_scores(np.clip(base.guesses[name], 0.0, 1.0), truth)
        out[name] = {k: float(np.mean(v)) for k, v in zip(("mse", "psnr", "ssim"), scores,
                                                           strict=True)}
    out["reference"] = {**out[base.baseline], "baseline": base.baseline}
    return out


def _mean_se(rows: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, list[float]]]:
    """Per baseline and score: ``[mean, standard error]`` over ``rows`` (SE 0 for one row)."""
    out: dict[str, dict[str, list[float]]] = {}
    for name in ATTAINABLE:
        out[name] = {}
        for key in ("mse", "psnr", "ssim"):
            values = np.array([r[name][key] for r in rows])
            se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
            out[name][key] = [float(values.mean()), se]
    return out


def study_priors(cfg: Config, *, other_batches: int = 0) -> dict[str, Any]:
    """The prior baselines of every (batch size, seed) a sweep of ``cfg`` attacked, their mean
    over seeds per batch size, and over ``other_batches`` other batches of each size."""
    import torch

    from fedpriv.training import sample_batch
    from strategies.attack_schedule import public_prior
    from strategies.server_run import dataset_of

    sweep = cfg.sweep
    if sweep.attack_on != "first-release":
        raise InputError("sweep.attack_on", sweep.attack_on,
                         "'first-release' (one attacked batch per seed, the same in every cell)")
    if sweep.attack_clients != 1:
        raise InputError("sweep.attack_clients", sweep.attack_clients, "1 (client 0 only)")
    if other_batches < 0:
        raise InputError("--batches", other_batches, "an integer >= 0")
    out: dict[str, Any] = {"config": {"data": cfg.data.name, "seeds": list(sweep.seeds)},
                           "batch_sizes": {}}
    for batch_size in sweep.batch_sizes:
        per_seed = {}
        for seed in sweep.seeds:
            run = config_from_dict({**cfg.to_dict(), "seed": seed})
            public = public_prior(dataset_of(run))
            if public is None:
                raise ValueError("the server holds no evaluation split: no public prior")
            images, labels = attacked_batch(run, seed, batch_size)
            per_seed[str(seed)] = {"batch": len(images), **baseline_scores(images, labels, public)}
        entry: dict[str, Any] = {"seeds": per_seed,
                                 "mean_over_seeds": _mean_se(list(per_seed.values()))}
        if other_batches:
            dataset = dataset_of(cfg)
            public = public_prior(dataset)
            assert public is not None  # checked above for the same data
            x, y = dataset.train_x, dataset.train_y
            generator = torch.Generator().manual_seed(OTHER_BATCHES_SEED)
            rows = []
            for _ in range(other_batches):
                idx = sample_batch(len(x), batch_size, cfg.train.sampling, generator)
                rows.append(baseline_scores(x[idx].numpy(), y[idx].numpy(), public))
            entry["other_batches"] = {"count": other_batches, **_mean_se(rows)}
        out["batch_sizes"][str(batch_size)] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="configs/paper-fmnist.toml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--batches", type=int, default=0,
                        help="other random batches per batch size (typicality check)")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.set)
    json.dump(study_priors(cfg, other_batches=args.batches), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
