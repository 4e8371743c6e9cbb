"""Pairing stored reconstructions with the stored true images, checked against the scorer.

The independent reference is ``attacks.scoring.score_reconstruction`` — the code that scored
the attack — followed by the alignment ``strategies.attack_schedule.attack_scores`` stores
(reconstruction ``order[j]`` at position ``j`` of the batch, in sampling order). The stored
ground truth is the client's round in record-id order, a superset of the batch.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from attacks.scoring import score_reconstruction
from fedpriv.audit import AuditStore, write_report
from fedpriv.audit.figures import as_images
from fedpriv.audit.gallery import attack_views, strip_png
from fedpriv.audit.pairing import PAIRED_AS_STORED, REMATCHED, UNPAIRED, pair_attack

POOL = 12  # records the client used in the round (all local steps), stored sorted by id
BATCH = 4  # the attacked batch, in the order the client sampled it


def _scored(seed: int, pool: int = POOL, batch: int = BATCH):
    """(stored truth, stored reconstructions, stored MSE, the batch's ids in sampling order)."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(size=(pool, 1, 8, 8))  # ids 0..pool-1, sorted
    ids = rng.permutation(pool)[:batch]  # sampling order
    attacker_order = rng.permutation(batch)  # reconstructions come in no particular order
    recon = np.clip(truth[ids][attacker_order] + rng.normal(0, 0.05, (batch, 1, 8, 8)), 0, 1)
    score = score_reconstruction(recon, truth[ids])
    aligned = recon[score.order]  # as the auditor stores it: aligned to the sampled batch
    return truth, aligned.astype(np.float32), score.summary()["mse"], ids


def test_stored_order_of_a_sorted_batch_is_kept():
    truth, aligned, mse, ids = _scored(1, pool=BATCH)
    sorted_truth = truth[ids]  # the pool is exactly the batch, here in batch order
    pairing = pair_attack(sorted_truth, aligned, mse)
    assert pairing.status == PAIRED_AS_STORED and pairing.paired
    np.testing.assert_array_equal(pairing.originals, sorted_truth)


@pytest.mark.parametrize("seed", range(5))
def test_rematching_recovers_the_scorers_pairs(seed):
    truth, aligned, mse, ids = _scored(seed)
    pairing = pair_attack(truth, aligned, mse)
    assert pairing.status == REMATCHED
    for recon, original in zip(pairing.reconstructions, pairing.originals, strict=True):
        [k] = [k for k, a in enumerate(aligned) if np.array_equal(a, recon)]
        np.testing.assert_array_equal(original, truth[ids[k]])  # the image it was scored on


def test_a_pairing_that_does_not_reproduce_the_mse_is_refused():
    truth, aligned, mse, _ = _scored(7)
    for stored in (2 * mse, None, float("nan")):
        pairing = pair_attack(truth, aligned, stored)
        assert pairing.status == UNPAIRED and not pairing.paired
        np.testing.assert_array_equal(pairing.originals, truth)


def test_rematching_beyond_the_pair_bound_is_refused_without_a_cost_matrix(monkeypatch):
    """A round's update is stored against every record the round used (56,976 at 1,407 steps
    of batch 128): re-matching those is a 26 GB cost matrix, so beyond
    ``MAX_MATCH_PAIRS`` the pairing is left unpaired, and says why."""
    import fedpriv.audit.pairing as pairing_module

    truth, aligned, mse, _ = _scored(3)
    monkeypatch.setattr(pairing_module, "MAX_MATCH_PAIRS", len(truth) * len(aligned) - 1)
    pairing = pair_attack(truth, aligned, mse)
    assert pairing.status == UNPAIRED and "pairs to re-match" in pairing.note
    monkeypatch.setattr(pairing_module, "MAX_MATCH_PAIRS", len(truth) * len(aligned))
    assert pair_attack(truth, aligned, mse).status == REMATCHED


def test_image_sizes_must_agree():
    with pytest.raises(ValueError, match="pixels"):
        pair_attack(np.zeros((2, 8, 8)), np.zeros((2, 4, 4)), 0.0)


def test_strip_shows_the_first_columns_at_a_whole_scale():
    from PIL import Image

    truth, aligned, mse, _ = _scored(3)
    png = strip_png(pair_attack(as_images(truth), as_images(aligned), mse), columns=3)
    width, height = Image.open(io.BytesIO(png)).size
    scale = 8  # 8-pixel images scaled to 64 pixels, gaps of `scale` pixels
    assert (width, height) == (3 * (8 * scale + scale) + scale, 2 * 8 * scale + 3 * scale)


@pytest.fixture
def store_with_attack(tmp_path):
    """One completed round whose attack was scored on a batch sampled out of id order."""
    truth, aligned, mse, ids = _scored(11)
    store = AuditStore.create(tmp_path / "run", {"rounds": 1}, seed=0)
    store.begin_round(1)
    store.write_ground_truth(1, 0, list(range(POOL)), {"images": truth})
    store.write_attack(1, 0, {"attack": "iga", "mse": mse, "ssim": 0.9},
                       {"images": aligned})  # fmt: skip
    store.write_attack(1, 0, {"attack": "iga-bayes", "mbp_estimate": 0.3})  # no tensor
    store.complete_round(1, {"accuracy": 0.5, "loss": 1.0})
    yield store, truth[ids]
    store.close()


def test_attack_views_draw_the_scored_pairs(store_with_attack):
    store, batch_truth = store_with_attack
    attacks = store.query("SELECT * FROM attacks ORDER BY attack_id")
    views = attack_views(store, attacks)
    drawn, listed = views[0], views[1]
    assert drawn.pairing == REMATCHED and drawn.png is not None and drawn.images == BATCH
    assert listed.png is None and listed.pairing is None and not listed.stored
    report = write_report(store, html=True)
    page = open(report["files"]["html"], encoding="utf-8").read()
    assert "paired as scored (re-matched)" in page and "not paired" not in page
    assert json.loads(open(report["files"]["report"]).read())["files"]["html"].endswith(
        "report.html"
    )
