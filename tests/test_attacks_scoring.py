"""Scores: assignment, MSE/PSNR/SSIM against scikit-image, relative leakage, labels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from attacks_support import digits
from skimage.metrics import structural_similarity

from attacks import label_accuracy, match_reconstructions, relative_leakage, score_reconstruction


def _truth(n: int = 6) -> np.ndarray:
    return digits(list(range(n)))[0].numpy()


def test_matching_recovers_the_shuffle():
    truth = _truth()
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(truth))
    noisy = np.clip(truth + rng.normal(0, 0.05, truth.shape), 0, 1)
    order = match_reconstructions(noisy[perm], truth)
    np.testing.assert_array_equal(perm[order], np.arange(len(truth)))


def test_matching_with_extra_reconstructions_leaves_decoys_out():
    truth = _truth(3)
    decoys = np.full((2, *truth.shape[1:]), 0.5)
    recon = np.concatenate([decoys, truth[::-1]])
    np.testing.assert_array_equal(match_reconstructions(recon, truth), [4, 3, 2])


def test_scores_match_independent_formulas_and_skimage():
    truth = _truth(4)
    rng = np.random.default_rng(1)
    recon = np.clip(truth + rng.normal(0, 0.1, truth.shape), 0, 1)
    score = score_reconstruction(recon, truth)
    np.testing.assert_array_equal(score.order, np.arange(4))
    mse = ((recon - truth) ** 2).reshape(4, -1).mean(axis=1)
    np.testing.assert_allclose(score.mse, mse, rtol=1e-12)
    np.testing.assert_allclose(score.psnr, 10 * np.log10(1.0 / mse), rtol=1e-12)
    ssim = [
        structural_similarity(r[0], t[0], data_range=1.0) for r, t in zip(recon, truth, strict=True)
    ]
    np.testing.assert_allclose(score.ssim, ssim, rtol=1e-12)
    summary = score.summary()
    assert summary["ssim"] == pytest.approx(np.mean(ssim))
    assert summary["best_index"] == int(np.argmax(ssim))
    assert summary["best_ssim"] == pytest.approx(max(ssim))


def test_perfect_reconstruction_and_other_data_range():
    truth = _truth(2)
    score = score_reconstruction(truth.copy(), truth)
    assert np.all(score.ssim == pytest.approx(1.0)) and np.all(score.mse == 0)
    assert np.all(np.isinf(score.psnr))
    rng = np.random.default_rng(2)
    recon = np.clip(truth + rng.normal(0, 0.1, truth.shape), 0, 1)
    unit = score_reconstruction(recon, truth).summary()
    signed = score_reconstruction(2 * recon - 1, 2 * truth - 1, data_range=(-1.0, 1.0)).summary()
    for key in ("mse", "psnr", "ssim"):
        assert signed[key] == pytest.approx(unit[key], rel=1e-9)


def test_relative_leakage_formula():
    np.testing.assert_allclose(relative_leakage([0.9, 0.2], [0.3, 0.4]), [2.0, -0.5])
    assert math.isnan(relative_leakage([0.9], [0.0])[0])
    assert math.isnan(relative_leakage([0.9], [-0.1])[0])


def test_relative_leakage_in_scores_is_against_the_prior_of_each_true_image():
    truth = _truth(2)
    prior = np.stack([truth[0] * 0.5 + 0.25, truth[1] * 0.5 + 0.1])  # in truth order
    recon = truth[::-1].copy()
    score = score_reconstruction(recon, truth, prior=prior)
    prior_ssim = np.array([
        structural_similarity(prior[0][0], truth[0][0], data_range=1.0),
        structural_similarity(prior[1][0], truth[1][0], data_range=1.0),
    ])
    np.testing.assert_allclose(score.prior_ssim, prior_ssim, rtol=1e-6)
    np.testing.assert_allclose(score.relative_leakage, (1.0 - prior_ssim) / prior_ssim, rtol=1e-6)
    summary = score.summary()
    assert summary["gain_ssim"] == pytest.approx(float(np.mean(1.0 - prior_ssim)))
    assert summary["prior_ssim"] == pytest.approx(float(prior_ssim.mean()))


def test_label_accuracy_is_a_multiset_match():
    assert label_accuracy(np.array([2, 1, 1]), np.array([1, 2, 2])) == pytest.approx(2 / 3)
    assert label_accuracy(np.array([5, 3]), np.array([3, 5])) == 1.0
    assert label_accuracy(np.array([0]), np.array([1])) == 0.0
    truth = _truth(2)
    score = score_reconstruction(
        truth, truth, recovered_labels=np.array([4, 0]), true_labels=np.array([0, 1])
    )
    assert score.label_accuracy == 0.5


def test_fewer_reconstructions_than_true_images_leave_nan_scores_without_a_prior():
    truth = _truth(3)
    score = score_reconstruction(truth[2:3].copy(), truth)
    assert score.order.tolist() == [-1, -1, 0] and score.matched == 1
    assert np.isnan(score.ssim[:2]).all() and score.ssim[2] == pytest.approx(1.0)
    summary = score.summary()
    assert summary["ssim"] == pytest.approx(1.0) and summary["best_index"] == 2
    assert (summary["matched"], summary["batch_size"]) == (1, 3)
    assert summary["gain_ssim"] is None and summary["prior_ssim"] is None
    empty = score_reconstruction(truth, truth[:0]).summary()
    assert empty["matched"] == 0 and empty["best_index"] is None and math.isnan(empty["ssim"])


def test_unmatched_true_images_count_at_the_prior_in_every_mean():
    """One perfect reconstruction of a batch of 3: the two missing images score as the prior's
    guess, so the mean SSIM is (1 + p0 + p1) / 3, not 1, and the gain is (1 − p2) / 3."""
    truth = _truth(3)
    prior = np.full(truth.shape, 0.3)
    score = score_reconstruction(truth[2:3].copy(), truth, prior=prior)
    p = np.array([structural_similarity(np.full((16, 16), 0.3), t[0], data_range=1.0)
                  for t in truth])
    mse = np.array([np.mean((0.3 - t) ** 2) for t in truth])
    summary = score.summary()
    assert summary["matched"] == 1 and summary["best_index"] == 2
    assert summary["ssim"] == pytest.approx((1.0 + p[0] + p[1]) / 3)
    assert summary["mse"] == pytest.approx((mse[0] + mse[1]) / 3)
    assert summary["gain_ssim"] == pytest.approx((1.0 - p[2]) / 3)
    assert summary["prior_ssim"] == pytest.approx(p.mean())
    np.testing.assert_allclose(score.relative_leakage[:2], 0.0, atol=1e-12)


def test_a_prior_of_the_wrong_shape_is_refused():
    truth = _truth(3)
    with pytest.raises(ValueError, match="prior of shape"):
        score_reconstruction(truth, truth, prior=truth[:2])


def _peak_bytes(call) -> int:
    """Peak bytes traced while ``call()`` runs (numpy reports its buffers to tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_matching_many_true_images_is_exact_and_holds_only_the_cost_matrix(monkeypatch):
    """A round's update is scored against every record the round used (128 against 60,000
    on Fashion-MNIST): the pairwise MSE is computed in blocks — the same numbers as all
    pixel differences at once, without their (n, m, pixels) array (262 MB here)."""
    import attacks.scoring as scoring

    rng = np.random.default_rng(3)
    recon, truth = rng.random((128, 1, 16, 16)), rng.random((1000, 1, 16, 16))
    truth[rng.permutation(1000)[:128]] = recon  # a perfect match hidden among the records
    diff = recon[:, None] - truth[None]
    cost = (diff**2).reshape(128, 1000, -1).mean(axis=2)
    expected = np.full(1000, -1)
    expected[np.argmin(cost, axis=1)] = np.arange(128)
    del diff
    order = None

    def match():
        nonlocal order
        order = match_reconstructions(recon, truth)

    assert _peak_bytes(match) < 96 * 2**20  # 1 MB of costs; 32 MiB of differences, squared
    np.testing.assert_array_equal(order, expected)
    monkeypatch.setattr(scoring, "_CHUNK_BYTES", 8 * 128 * 256 * 7)  # blocks of 7 images
    np.testing.assert_array_equal(match_reconstructions(recon, truth), expected)
    monkeypatch.setattr(scoring, "MAX_MATCH_PAIRS", 128 * 1000 - 1)
    with pytest.raises(ValueError, match="128 reconstructions to 1000 true images"):
        match_reconstructions(recon, truth)


def _digit_on_black() -> tuple[np.ndarray, np.ndarray]:
    """A 16×16 true image: a bright ring on a black background, and its support by hand."""
    yy, xx = np.mgrid[:16, :16]
    radius = np.hypot(yy - 7.5, xx - 7.5)
    ring = ((radius > 2.5) & (radius < 5.5)).astype(np.float64)
    return ring[None] * 0.9, ring.astype(bool)


def test_support_mask_is_where_the_truth_leaves_its_background():
    from attacks.scoring import support_mask

    truth, support = _digit_on_black()
    np.testing.assert_array_equal(support_mask(truth), support)
    np.testing.assert_array_equal(support_mask(1.0 - truth), support)  # a white background


def test_support_ssim_is_the_ssim_map_averaged_on_the_support():
    """A constructed pair: the truth's ring, and a guess that is right on the background and
    wrong on the ring. The whole-image SSIM is flattered by the background; the support SSIM
    is the SSIM map (skimage, full=True) averaged by hand over the ring inside the border strip
    skimage's mean leaves out."""
    from attacks.scoring import support_ssim

    truth, support = _digit_on_black()
    guess = np.zeros_like(truth)
    guess[0][support] = np.random.default_rng(0).random(support.sum()) * 0.9
    _, full = structural_similarity(guess[0], truth[0], data_range=1.0, win_size=7, full=True)
    inside = np.zeros_like(support)
    inside[3:13, 3:13] = True
    by_hand = full[support & inside].mean()
    whole = structural_similarity(guess[0], truth[0], data_range=1.0, win_size=7)
    assert support_ssim(guess, truth) == pytest.approx(by_hand, rel=1e-12)
    assert support_ssim(guess, truth) < whole  # the background inflated the whole-image SSIM
    # the whole image as the mask gives the plain SSIM; an empty support gives NaN
    everywhere = np.ones_like(support)
    assert support_ssim(guess, truth, everywhere) == pytest.approx(whole, rel=1e-12)
    assert math.isnan(support_ssim(guess, np.zeros_like(truth)))


def test_guess_scores_reads_both_ssims_from_one_map_as_the_separate_calls_give_them():
    """guess_scores compares each pair once (full=True gives the mean and the map); its SSIM
    is skimage's plain call's and its support SSIM the map averaged by hand over the support."""
    from attacks.scoring import guess_scores

    truth, support = _digit_on_black()
    rng = np.random.default_rng(1)
    guesses = np.stack([np.clip(truth + 0.2 * rng.standard_normal(truth.shape), 0, 1),
                        rng.random(truth.shape)])
    scores = guess_scores(guesses, np.stack([truth, truth]))
    inside = np.zeros_like(support)
    inside[3:13, 3:13] = True
    for i, guess in enumerate(guesses):
        whole = structural_similarity(guess[0], truth[0], data_range=1.0, win_size=7)
        _, full = structural_similarity(guess[0], truth[0], data_range=1.0, win_size=7,
                                        full=True)
        assert scores.ssim[i] == pytest.approx(whole, rel=1e-12)
        assert scores.support_ssim[i] == pytest.approx(full[support & inside].mean(), rel=1e-12)
    assert scores.ssim[0] > scores.ssim[1]  # the noisy truth beats noise: the pairs differ


def test_score_summary_has_both_priors_and_the_gains_over_each():
    truth, _ = _digit_on_black()
    truth = np.stack([truth, truth[:, ::-1].copy() * 0.5])
    label = np.clip(truth * 0.8, 0, 1)
    no_update = np.full_like(truth, truth.mean())
    recon = np.clip(truth + 0.02, 0, 1)
    s = score_reconstruction(recon, truth, prior=label, no_update_prior=no_update).summary()
    own = [structural_similarity(r[0], t[0], data_range=1.0) for r, t in zip(recon, truth,
                                                                             strict=True)]
    lab = [structural_similarity(g[0], t[0], data_range=1.0) for g, t in zip(label, truth,
                                                                             strict=True)]
    nou = [structural_similarity(g[0], t[0], data_range=1.0) for g, t in zip(no_update, truth,
                                                                             strict=True)]
    assert s["prior_ssim"] == pytest.approx(np.mean(lab))
    assert s["no_update_prior_ssim"] == pytest.approx(np.mean(nou))
    assert s["gain_ssim"] == pytest.approx(np.mean(own) - np.mean(lab))
    assert s["no_update_gain_ssim"] == pytest.approx(np.mean(own) - np.mean(nou))
    assert s["no_update_gain_support_ssim"] == pytest.approx(
        s["support_ssim"] - s["no_update_prior_support_ssim"])
    bare = score_reconstruction(recon, truth).summary()
    assert bare["no_update_prior_ssim"] is None and bare["no_update_gain_ssim"] is None
