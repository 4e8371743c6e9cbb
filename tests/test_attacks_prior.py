"""Prior baselines (attacks.estimators.prior) and the gains of an attack row over them, each
checked against a baseline computed here by hand on small arrays."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from attacks.estimators.prior import BASELINES, PublicPrior, prior_baseline
from attacks.result import AttackResult
from fedpriv.audit.pairing import PAIRED_AS_STORED, pair_attack
from strategies.attack_schedule import attack_scores

# four 1×8×8 public images: two of class 0 (dark left half), two of class 1 (dark right half)
_LEFT, _RIGHT = np.ones((1, 8, 8)), np.ones((1, 8, 8))
_LEFT[..., :4], _RIGHT[..., 4:] = 0.0, 0.0
_PUBLIC = PublicPrior(np.stack([_LEFT * 0.9, _LEFT * 0.7, _RIGHT * 0.8, _RIGHT * 0.6]),
                      np.array([0, 0, 1, 1]))


def _ssim(a: np.ndarray, b: np.ndarray) -> float:
    return structural_similarity(a[0], b[0], data_range=1.0, win_size=7)


def test_baselines_are_the_public_mean_the_class_means_and_the_nearest_public_image():
    truth = np.stack([_RIGHT * 0.75, _LEFT * 0.85])
    base = prior_baseline(truth, np.array([0, 1]), _PUBLIC)
    mean = (_LEFT * 1.6 + _RIGHT * 1.4) / 4
    np.testing.assert_allclose(base.guesses["mean"], [mean, mean])
    # class means by hand, assigned to the true images they are closest to
    np.testing.assert_allclose(base.guesses["class_mean"], [_RIGHT * 0.7, _LEFT * 0.8])
    np.testing.assert_allclose(base.guesses["pool_oracle"], [_RIGHT * 0.8, _LEFT * 0.9])
    assert base.baseline == "class_mean" and set(base.guesses) == set(BASELINES)


def test_labels_missing_or_absent_from_the_public_set_fall_back_to_the_mean():
    truth = np.stack([_RIGHT * 0.75, _LEFT * 0.85])
    base = prior_baseline(truth, np.array([7]), _PUBLIC)  # one label, and not a public class
    mean = (_LEFT * 1.6 + _RIGHT * 1.4) / 4
    np.testing.assert_allclose(base.guesses["class_mean"], [mean, mean])
    assert base.baseline == "mean"  # equal scores: the plainer baseline


def test_attack_row_carries_prior_and_gain_and_fills_unmatched_images_with_the_prior():
    truth = np.stack([_RIGHT * 0.75, _LEFT * 0.85, _LEFT * 0.5]).astype(np.float32)
    recon = truth[:1].copy()  # the attack returned one image, exact
    result = AttackResult("iga", recon, np.array([1]), recon, 0.0, 1, 1, 0, 0.0, False)
    row, aligned = attack_scores(result, truth, np.array([1, 0, 0]), _PUBLIC)
    # by hand: recovered label 1 → class mean of 1 goes to true image 0; the rest get the mean
    mean = (_LEFT * 1.6 + _RIGHT * 1.4) / 4
    guess = [_RIGHT * 0.7, mean, mean]
    prior_ssim = np.array([_ssim(g, t) for g, t in zip(guess, truth, strict=True)])
    assert row["prior"]["baseline"] == "class_mean"
    assert row["prior"]["ssim"] == pytest.approx(prior_ssim.mean(), rel=1e-6)
    ssim = np.array([1.0, prior_ssim[1], prior_ssim[2]])
    assert row["ssim"] == pytest.approx(ssim.mean(), rel=1e-6)
    assert row["gain_ssim"] == pytest.approx((1.0 - prior_ssim[0]) / 3, rel=1e-6)
    assert (row["prior"]["matched"], row["prior"]["batch_size"]) == (1, 3)
    assert set(row["prior"]["baselines"]) == set(BASELINES)
    np.testing.assert_allclose(aligned[0], truth[0])
    np.testing.assert_allclose(aligned[1:], np.stack(guess[1:]), rtol=1e-6)
    # the stored MSE is the mean over the stored (aligned) pairs, unmatched ones included: the
    # report's pairing check reproduces it as stored
    assert row["mse"] == pytest.approx(float(((aligned - truth) ** 2).mean()), rel=1e-6)
    assert pair_attack(truth, aligned, row["mse"]).status == PAIRED_AS_STORED


def test_without_public_data_there_is_no_prior():
    truth = np.stack([_RIGHT * 0.75]).astype(np.float32)
    result = AttackResult("iga", truth.copy(), np.array([1]), truth, 0.0, 1, 1, 0, 0.0, False)
    row, _ = attack_scores(result, truth, np.array([1]), None)
    assert row["prior"] is None and row["gain_ssim"] is None


def test_public_prior_needs_images_with_labels():
    with pytest.raises(ValueError, match="public prior"):
        PublicPrior(np.zeros((0, 1, 8, 8)), np.zeros(0))


def test_the_nearest_public_image_is_found_in_blocks(monkeypatch):
    """The pool oracle for a round's every record (60,000) against the test set (10,000) is
    computed a block of records at a time: the same picks as the whole cost matrix, without
    holding it (here 20,000 × 1,000 × 8 bytes = 160 MB)."""
    import tracemalloc

    import attacks.estimators.prior as prior

    rng = np.random.default_rng(5)
    pool, truth = rng.random((1000, 1, 4, 4)), rng.random((20_000, 1, 4, 4))
    public = PublicPrior(pool, rng.integers(0, 10, 1000))
    flat, rows = truth.reshape(20_000, -1), pool.reshape(1000, -1)
    expected = pool[((flat[:, None] - rows[None]) ** 2).sum(axis=2).argmin(axis=1)]
    tracemalloc.start()
    try:
        found = public.nearest(truth)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(found, expected)
    assert peak < 96 * 2**20  # a block's products and costs: 2 × 32 MiB
    monkeypatch.setattr(prior, "_ROW_BYTES", 8 * 1000 * 333)  # blocks of 333 records
    np.testing.assert_array_equal(public.nearest(truth), expected)
