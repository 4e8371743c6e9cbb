"""Fresh noise across a client's rounds (issue 25 item 4; fedpriv/verification/replay.py).

The sketch's rows are orthonormal (so the sketched noise is exactly N(0, s²I_m)); honest
clients, even with the same signal every round, are rejected at most α of the time; noise
reused every round, noise cancelled (z then −z), and replays perturbed by 1% are caught.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedpriv.verification.replay import SPAN_ROUNDS, UpdateSketches

DIM = 3_000
ALPHA = 0.01


def _signal(rng: np.random.Generator, norm: float) -> np.ndarray:
    s = rng.standard_normal(DIM)
    return s * (norm / np.linalg.norm(s))


def test_sketch_rows_are_orthonormal() -> None:
    sketches = UpdateSketches(500, seed=3)
    rows = np.stack([sketches.sketch(e) for e in np.eye(500)], axis=1)  # R, shape (m, p)
    np.testing.assert_allclose(rows @ rows.T, np.eye(sketches.width), atol=1e-12)


def test_honest_false_alarms_at_most_alpha() -> None:
    """Six rounds per client, the *same* large signal every round (the most correlated honest
    history) plus fresh noise; 5 tests per client, 600 clients."""
    rng = np.random.default_rng(5)
    sketches = UpdateSketches(DIM, seed=0)
    rejections = tests = 0
    for cid in range(600):
        signal = _signal(rng, 200.0)
        for rnd in range(6):
            update = signal + rng.standard_normal(DIM)
            if rnd:
                verdict = sketches.fresh_noise_tests([(cid, update, 1.0, 0.0)], alpha=ALPHA)[0]
                rejections += verdict.status == "inconsistent"
                tests += 1
            sketches.add(rnd, cid, update)
    assert rejections <= stats.binom.isf(1e-9, tests, ALPHA)


@pytest.mark.parametrize("cheat", ["reused", "cancelling", "perturbed-replay", "old-replay"])
def test_cheats_are_caught(cheat: str) -> None:
    rng = np.random.default_rng(6)
    sketches = UpdateSketches(DIM, seed=1)
    for cid in range(10):
        z = rng.standard_normal(DIM)
        if cheat == "reused":  # the same z every round, honest signals
            for rnd in range(3):
                sketches.add(rnd, cid, _signal(rng, 20.0) + z)
            update = _signal(rng, 20.0) + z
        elif cheat == "cancelling":  # z then −z: the server's sum sees no noise
            sketches.add(0, cid, _signal(rng, 20.0) + z)
            update = _signal(rng, 20.0) - z
        else:
            rounds = SPAN_ROUNDS + 5 if cheat == "old-replay" else 3
            history = [_signal(rng, 20.0) + rng.standard_normal(DIM) for _ in range(rounds)]
            for rnd, h in enumerate(history):
                sketches.add(rnd, cid, h)
            old = history[0]
            update = old + 0.01 * np.linalg.norm(old) / np.sqrt(DIM) * rng.standard_normal(DIM)
            assert sketches.replay_of(cid, update) is None  # not an exact replay
        verdict = sketches.fresh_noise_tests([(cid, update, 1.0, 0.0)], alpha=1e-6)[0]
        assert verdict.status == "inconsistent", verdict.reason


def test_first_round_and_no_noise_are_not_tested() -> None:
    sketches = UpdateSketches(DIM, seed=2)
    update = np.ones(DIM)
    first = sketches.fresh_noise_tests([(0, update, 1.0, 0.0)])[0]
    assert first.status == "consistent" and first.alpha is None  # vacuous, deterministic
    sketches.add(0, 0, update)
    assert sketches.fresh_noise_tests([(0, update, 0.0, 0.0)])[0].status == "unverifiable"


def test_older_rounds_alone_give_the_per_round_projection() -> None:
    """Rounds older than ``SPAN_ROUNDS`` are each tested alone, all at once
    (``distances_from_lines``): each distance and dimension is one QR's
    (``distance_from_span`` of that row alone) to 1e-12 of ``‖v‖``, zero, tiny and huge rows
    included; and the test's p-value and nearest distance over 40 earlier rounds are those of
    one QR and one χ² tail per group (the test as it was written first)."""
    from scipy import special

    from fedpriv.verification.replay import distance_from_span, distances_from_lines

    rng = np.random.default_rng(11)
    vector = rng.standard_normal(64)
    rows = rng.standard_normal((12, 64))
    rows[2], rows[3], rows[4], rows[5] = 0.0, 1e-200 * rows[3], 1e300 * rows[4], -3.0 * vector
    distances, ranks = distances_from_lines(vector, rows)
    for i, row in enumerate(rows):
        distance, rank = distance_from_span(vector, row[None, :])
        assert ranks[i] == rank
        assert abs(distances[i] - distance) <= 1e-12 * np.linalg.norm(vector)
    assert distances[5] <= 1e-12 * np.linalg.norm(vector) and distances[2] == pytest.approx(
        np.linalg.norm(vector), rel=1e-15)

    sketches = UpdateSketches(DIM, seed=1)
    signal = _signal(rng, 50.0)
    for rnd in range(SPAN_ROUNDS + 8):
        sketches.add(rnd, 0, signal + rng.standard_normal(DIM))
    update = signal + rng.standard_normal(DIM)
    verdict = sketches.fresh_noise_tests([(0, update, 1.0, 0.1)], alpha=ALPHA)[0]
    earlier = [y for _, y in sketches._seen[0]]
    new = sketches.sketch(update)
    groups = [earlier[-SPAN_ROUNDS:]] + [[y] for y in earlier[:-SPAN_ROUNDS]]
    tails, nearest = [], np.inf
    for group in groups:
        distance, rank = distance_from_span(new, np.stack(group))
        nearest = min(nearest, distance)
        tails.append(float(special.chdtr(sketches.width - rank, (distance + 0.1) ** 2)))
    assert verdict.p_value == pytest.approx(min(1.0, len(tails) * min(tails)), rel=1e-9)
    assert verdict.statistic["distance_in_noise_stds"] == pytest.approx(nearest, rel=1e-12)
    assert verdict.statistic["earlier_rounds"] == SPAN_ROUNDS + 8


def test_a_replay_is_named_by_its_first_earlier_round() -> None:
    """``replay_of`` compares the new sketch with every earlier one at once: a repeat of round
    3 (also sent again in round 40) is named round 3, a repeat moved by 1e-4 of its norm still
    is, one moved by 1e-2 is not, as one comparison per earlier round finds."""
    rng = np.random.default_rng(4)
    sketches = UpdateSketches(DIM, seed=2)
    updates = [rng.standard_normal(DIM) for _ in range(SPAN_ROUNDS + 10)]
    updates[40] = updates[3]
    for rnd, update in enumerate(updates):
        sketches.add(rnd, 7, update)

    def one_by_one(update: np.ndarray) -> int | None:
        new = sketches.sketch(update)
        return next((rnd for rnd, old in sketches._seen[7]
                     if np.linalg.norm(new - old) <= 1e-3 * np.linalg.norm(old)), None)

    for moved, expected in ((0.0, 3), (1e-4, 3), (1e-2, None)):
        nudge = rng.standard_normal(DIM)
        update = updates[3] + moved * np.linalg.norm(updates[3]) * nudge / np.linalg.norm(nudge)
        assert sketches.replay_of(7, update) == expected == one_by_one(update)
    assert sketches.replay_of(8, updates[3]) is None  # another client's history
