"""The two priors (attacks.estimators.prior: the no-update prior, the label prior) and the gains
of an attack row over each, the support SSIM and the within-class identification score, each
checked against a value computed here by hand on small arrays."""

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
    np.testing.assert_allclose(base.guesses["no_update"], [mean, mean])
    # class means by hand, assigned to the true images they are closest to
    np.testing.assert_allclose(base.guesses["label"], [_RIGHT * 0.7, _LEFT * 0.8])
    np.testing.assert_allclose(base.guesses["pool_oracle"], [_RIGHT * 0.8, _LEFT * 0.9])
    assert base.baseline == "label" and set(base.guesses) == set(BASELINES)


def test_labels_missing_or_absent_from_the_public_set_fall_back_to_the_mean():
    truth = np.stack([_RIGHT * 0.75, _LEFT * 0.85])
    base = prior_baseline(truth, np.array([7]), _PUBLIC)  # one label, and not a public class
    mean = (_LEFT * 1.6 + _RIGHT * 1.4) / 4
    np.testing.assert_allclose(base.guesses["label"], [mean, mean])
    assert base.baseline == "label"  # the label prior is the reference, whatever it scores


def test_attack_row_carries_prior_and_gain_and_fills_unmatched_images_with_the_prior():
    truth = np.stack([_RIGHT * 0.75, _LEFT * 0.85, _LEFT * 0.5]).astype(np.float32)
    recon = truth[:1].copy()  # the attack returned one image, exact
    result = AttackResult("iga", recon, np.array([1]), recon, 0.0, 1, 1, 0, 0.0, False)
    row, aligned = attack_scores(result, truth, np.array([1, 0, 0]), _PUBLIC)
    # by hand: recovered label 1 → class mean of 1 goes to true image 0; the rest get the mean
    mean = (_LEFT * 1.6 + _RIGHT * 1.4) / 4
    guess = [_RIGHT * 0.7, mean, mean]
    prior_ssim = np.array([_ssim(g, t) for g, t in zip(guess, truth, strict=True)])
    assert row["prior"]["baseline"] == "label"
    assert row["prior"]["ssim"] == pytest.approx(prior_ssim.mean(), rel=1e-6)
    # the no-update prior: the public mean for every image, and the gain over it
    no_update = np.array([_ssim(mean, t) for t in truth])
    assert row["prior"]["no_update"]["ssim"] == pytest.approx(no_update.mean(), rel=1e-6)
    assert row["prior"]["no_update_gain"]["ssim"] == pytest.approx(
        (ssim_all := np.array([1.0, prior_ssim[1], prior_ssim[2]])).mean() - no_update.mean(),
        rel=1e-6)
    assert row["prior"]["no_update_gain"]["ssim"] > row["gain_ssim"]  # labels leak too
    assert ssim_all[0] == 1.0
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


def test_attack_row_carries_the_support_ssim_of_its_aligned_pairs():
    from attacks.scoring import support_ssim

    truth = np.stack([_RIGHT * 0.75, _LEFT * 0.85]).astype(np.float32)
    recon = np.clip(truth + 0.05, 0, 1)
    result = AttackResult("iga", recon, np.array([1, 0]), recon, 0.0, 1, 1, 0, 0.0, False)
    row, _ = attack_scores(result, truth, np.array([1, 0]), _PUBLIC)
    pairs = [support_ssim(r.astype(float), t.astype(float)) for r, t in zip(recon, truth,
                                                                             strict=True)]
    assert row["estimate"]["support_ssim"] == pytest.approx(np.mean(pairs), rel=1e-9)
    assert row["prior"]["no_update"]["support_ssim"] is not None


def test_identification_counts_by_brute_force():
    """Each true image among look-alikes of its class: a success where the candidate nearest
    any of the attacker's images (in no particular order) is the true one. Counted here by
    looping over every candidate and every image."""
    from attacks.estimators.prior import within_class_identification

    rng = np.random.default_rng(3)
    pool = rng.random((40, 1, 4, 4))
    labels = np.repeat([0, 1], 20)
    public = PublicPrior(pool, labels)
    truth = rng.random((12, 1, 4, 4))
    # the attacker's images: six true images slightly moved, and five random ones, shuffled
    guesses = rng.permutation(np.concatenate([truth[:6] + 0.01, rng.random((5, 1, 4, 4))]))
    classes = np.array([0, 1] * 6)
    found = within_class_identification(guesses, truth, classes, public, candidates=8, seed=4)
    # brute force with the same draw of look-alikes
    draw = np.random.default_rng([4, 39])
    hits = 0
    for t, c in zip(truth, classes, strict=True):
        rows = np.flatnonzero(labels == c)
        others = pool[np.sort(draw.choice(rows, size=7, replace=False))]
        dist = [min(float(((g - x) ** 2).mean()) for g in guesses) for x in [t, *others]]
        hits += int(all(dist[0] < d for d in dist[1:]))
    assert (found.successes, found.trials, found.candidates) == (hits, 12, 8)
    assert found.successes >= 6  # the close guesses all identify
    assert within_class_identification(guesses[:0], truth, classes, public) is None


def test_identification_does_not_use_the_matching_to_the_truth():
    """Random images identify at chance: the attacker's rule never sees which image was matched
    to which true image (matching first would pick for each true image its nearest random
    image and lift the rate above chance)."""
    from attacks.estimators.prior import within_class_identification

    rng = np.random.default_rng(8)
    pool, labels = rng.random((400, 1, 4, 4)), np.repeat(np.arange(4), 100)
    truth = rng.random((400, 1, 4, 4))
    found = within_class_identification(rng.random((400, 1, 4, 4)), truth, labels % 4,
                                        PublicPrior(pool, labels), candidates=10, seed=1)
    leak = found.leakage()
    assert leak.log_lower is None or leak.log_lower < 0.0 < leak.log_upper  # chance: log 1


def test_identification_leakage_is_log_m_p_with_a_clopper_pearson_interval():
    """log(M·P̂) and its interval against scipy.stats.beta directly (Clopper–Pearson)."""
    from scipy.stats import beta

    from attacks.estimators.prior import Identification

    k, n, m, a = 7, 20, 10, 0.05
    leak = Identification(k, n, m).leakage(log_capacity=1.5, confidence=1 - a)
    low, high = beta.ppf(a / 2, k, n - k + 1), beta.ppf(1 - a / 2, k + 1, n - k)
    assert leak.log_value == pytest.approx(np.log(m * k / n))
    assert leak.log_lower == pytest.approx(np.log(m * low), rel=1e-9)
    assert leak.log_upper == pytest.approx(np.log(m * high), rel=1e-9)
    assert leak.log_bound == 1.5
    assert Identification(0, n, m).leakage().log_lower is None  # log 0
    assert Identification(0, n, m).leakage().log_bound == pytest.approx(np.log(m))


def test_without_public_data_there_is_no_prior():
    truth = np.stack([_RIGHT * 0.75]).astype(np.float32)
    result = AttackResult("iga", truth.copy(), np.array([1]), truth, 0.0, 1, 1, 0, 0.0, False)
    row, _ = attack_scores(result, truth, np.array([1]), None)
    assert row["prior"] is None and row["gain_ssim"] is None
    assert row["estimate"]["identification"] is None


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


def test_report_sets_the_identification_beside_the_rounds_capacity_bound():
    """report.json's attack entry from a stored row: the label prior as ``prior``/``gain``, the
    no-update prior beside it, and log(M·P̂) with its interval against the tally's log C."""
    import json

    from scipy.stats import beta

    from fedpriv.audit.report_attack import attack_scores_summary

    truth = np.stack([_RIGHT * 0.75, _LEFT * 0.85]).astype(np.float32)
    result = AttackResult("iga", truth.copy(), np.array([1, 0]), truth, 0.0, 1, 1, 0, 0.0, False)
    row, _ = attack_scores(result, truth, np.array([1, 0]), _PUBLIC)
    stored = {**row, "prior_json": json.dumps(row["prior"]),
              "estimate_json": json.dumps(row["estimate"])}
    found = row["estimate"]["identification"]
    # the public set holds two look-alikes of each class: M = 3, and exact images name them
    assert (found["successes"], found["trials"], found["candidates"]) == (2, 2, 3)
    out = attack_scores_summary(stored, {"log_capacity_round": 0.25, "threat_model": "record"})
    assert out["prior"]["baseline"] == "label" and out["gain"]["ssim"] == row["gain_ssim"]
    assert out["no_update_prior"]["ssim"] == row["prior"]["no_update"]["ssim"]
    assert out["no_update_gain"] == row["prior"]["no_update_gain"]
    ident = out["identification"]
    low = beta.ppf(0.025, 2, 1)  # Clopper–Pearson lower end at 2 of 2
    assert ident["log_value"] == pytest.approx(np.log(3.0))
    assert ident["log_lower"] == pytest.approx(np.log(3 * low), rel=1e-9)
    assert (ident["log_bound"], ident["log_capacity"]) == (0.25, 0.25)
    assert ident["bound_from"] == "the round's log C (record level)"
    unbounded = attack_scores_summary(stored, {"log_capacity_round": None})["identification"]
    assert unbounded["log_bound"] == pytest.approx(np.log(3.0)) and (
        unbounded["log_capacity"] is None)


def test_identification_bound_is_the_gaussian_capacity_in_the_candidates_span():
    """The bound stored with the score: §5's Gaussian formula in min(p, M − 1) dimensions at
    r = C, s = σC, once per local step; none (inf) without noise."""
    from attacks_support import fresh_params

    from attacks.view import ServerView
    from fedpriv.leakage.capacity import log_capacity_gaussian
    from strategies.attack_schedule import identification_bound

    params = fresh_params(0)
    view = ServerView(model_name="paper-mlp", input_shape=(1, 16, 16), num_classes=10,
                      global_params=params, update=[np.zeros_like(p) for p in params],
                      learning_rate=0.1, batch_size=8.0, local_steps=3, mechanism="gaussian",
                      mechanism_params={"clip": 2.0, "noise_multiplier": 0.7})
    expected = 3 * log_capacity_gaussian(49, 2.0, 0.7 * 2.0)
    assert identification_bound(view, 50) == pytest.approx(expected, rel=1e-9)
    bare = ServerView(model_name="paper-mlp", input_shape=(1, 16, 16), num_classes=10,
                      global_params=params, update=[np.zeros_like(p) for p in params],
                      learning_rate=0.1, batch_size=8.0)
    assert identification_bound(bare, 50) == np.inf


@pytest.mark.parametrize("sigma", [3.0, 5.0])
def test_an_honest_noisy_client_identifies_no_more_than_its_capacity_allows(sigma):
    """A small noisy run: IGA on a Gaussian release of 16 digits (σ = 3 or 5, C = 1), scored
    with its identification among 50 public look-alikes. The bound min(log C, log M) is
    finite and binding here (log C < log 50), and the interval's lower end lies under it."""
    from attacks_support import digits

    from attacks import run_attack, simulate_view
    from attacks.estimators.prior import Identification

    x, y = digits(list(range(16)))
    public_x, public_y = digits(list(range(1000, 1797)))
    public = PublicPrior(public_x.numpy(), public_y.numpy())
    view = simulate_view("paper-mlp", x, y, mechanism="gaussian", seed=0,
                         mechanism_params={"clip": 1.0, "noise_multiplier": sigma})
    result = run_attack("iga", view, iterations=60, seed=0)
    row, _ = attack_scores(result, x.numpy(), y.numpy(), public, view)
    found = row["estimate"]["identification"]
    assert found["trials"] == 16 and found["candidates"] == 50
    leak = Identification(found["successes"], found["trials"], found["candidates"]).leakage(
        found["log_capacity"])
    assert leak.log_bound == found["log_capacity"] < np.log(50)
    assert leak.log_lower is None or leak.log_lower <= leak.log_bound
