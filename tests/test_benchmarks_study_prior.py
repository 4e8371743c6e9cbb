"""The recorded study's prior baselines (benchmarks/study_prior.py) on the offline digits: the
batch it scores is the one the client's first training step draws, and its scores are the
plain SSIM of the public mean image (the no-update prior)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from benchmarks.study_prior import attacked_batch, main, study_priors
from clients.local_data import client_data
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism
from fedpriv.models import build_model
from fedpriv.seeding import make_generator
from fedpriv.training import local_train
from strategies.server_run import dataset_of
from workflows.config import config_from_dict

SWEEP = {"attack_on": "first-release", "attack_clients": 1, "seeds": [0, 1],
         "batch_sizes": [8], "epsilons": [], "mechanisms": ["gaussian"],
         "noise_multipliers": [1.0]}


def _cfg(seed: int = 0):
    return config_from_dict({"seed": seed, "data": {"name": "digits", "num_clients": 2},
                             "train": {"batch_size": 8}, "sweep": SWEEP})


def test_the_batch_is_the_first_one_local_training_draws() -> None:
    cfg = _cfg(seed=1)
    x, y, ids = client_data(cfg.data, 1, 0, 2)
    result = local_train(build_model("paper-mlp", (1, 16, 16), 10), x, y,
                         build_mechanism("none", {}), lr=0.1, local_steps=1, batch_size=8,
                         sampling="poisson", generator=make_generator(1, 0, 1),
                         record_ids=ids.tolist())
    train = dataset_of(cfg).train_x.numpy()
    images, labels = attacked_batch(cfg, 1, 8)
    first = result.batch_indices[0]
    np.testing.assert_array_equal(images, train[first])
    np.testing.assert_array_equal(labels, dataset_of(cfg).train_y.numpy()[first])


def test_no_update_prior_is_the_plain_ssim_of_the_public_mean() -> None:
    cfg = _cfg()
    out = study_priors(cfg, other_batches=3)["batch_sizes"]["8"]
    for seed in ("0", "1"):  # the digits' test split, the public set, depends on the seed
        mean = dataset_of(_cfg(int(seed))).test_x.numpy().astype(np.float64).mean(axis=0)[0]
        images, _ = attacked_batch(_cfg(int(seed)), int(seed), 8)
        expected = np.mean([structural_similarity(mean, x[0].astype(np.float64), data_range=1.0)
                            for x in images])
        got = out["seeds"][seed]
        assert got["no_update"]["ssim"] == pytest.approx(expected, rel=1e-9)
        assert got["batch"] == len(images)
        assert got["reference"] == {**got["label"], "baseline": "label"}
    assert out["mean_over_seeds"]["no_update"]["ssim"][0] == pytest.approx(
        np.mean([out["seeds"][s]["no_update"]["ssim"] for s in ("0", "1")]))
    assert out["other_batches"]["count"] == 3


def test_a_sweep_attacking_round_one_updates_is_refused() -> None:
    with pytest.raises(InputError, match="sweep.attack_on"):
        study_priors(config_from_dict({"data": {"name": "digits"},
                                       "sweep": {**SWEEP, "attack_on": "round-1-update"}}))


def test_the_command_prints_the_priors_of_a_preset(tmp_path, capsys) -> None:
    preset = tmp_path / "study.toml"
    preset.write_text('[data]\nname = "digits"\n[sweep]\nattack_on = "first-release"\n'
                      "seeds = [0]\nbatch_sizes = [8]\nepsilons = []\n"
                      'mechanisms = ["gaussian"]\nnoise_multipliers = [1.0]\n')
    assert main([str(preset), "--set", "sweep.batch_sizes=[4]"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["batch_sizes"]) == ["4"] and list(out["batch_sizes"]["4"]["seeds"]) == ["0"]
