"""A round's fresh-noise tests at once (issue 37) give each reply the verdict of the test one
reply at a time, bit for bit: clients with no, one, several and more than ``SPAN_ROUNDS``
earlier rounds, a rank-deficient history, reused and cancelled noise, no declared noise, and
histories that span the sketch — against the QR-per-reply test it replaces."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from fedpriv.verification.replay import (
    FRESH,
    SPAN_ROUNDS,
    UpdateSketches,
    distances_from_lines,
)
from fedpriv.verification.verdict import Verdict, decide, unverifiable

ALPHA = 1e-6


def _span_distance(vector: np.ndarray, rows: np.ndarray) -> tuple[float, int]:
    """The distance from the span by one QR of its own (the test before batching)."""
    q, r = np.linalg.qr(rows.T)
    diag = np.abs(np.diag(r))
    top = float(diag.max()) if diag.size else 0.0
    basis = q[:, diag > 1e-10 * top] if top > 0 else q[:, :0]
    residual = vector - basis @ (basis.T @ vector)
    return float(np.linalg.norm(residual)), int(basis.shape[1])


def _one_at_a_time(sketches: UpdateSketches, cid: int, update: np.ndarray, std: float,
                   slack: float) -> Verdict:
    """The fresh-noise test of one update as it was before batching (a reference)."""
    earlier = [y for _, y in sketches._seen.get(cid, [])]
    if not earlier:
        return Verdict("fresh-noise", "consistent", "the client's first accepted update: no "
                       "earlier release to share noise with", p_value=1.0, speaks_to=FRESH)
    if not std > 0 or not math.isfinite(std):
        return unverifiable("fresh-noise", "no Gaussian noise declared", speaks_to=FRESH)
    new = sketches.sketch(update)
    distance, rank = _span_distance(new, np.stack(earlier[-SPAN_ROUNDS:]))
    distances, ranks = np.array([distance]), np.array([rank])
    if len(earlier) > SPAN_ROUNDS:
        older, lines = distances_from_lines(new, np.stack(earlier[:-SPAN_ROUNDS]))
        distances, ranks = np.append(distances, older), np.append(ranks, lines)
    free = sketches.width - ranks
    distances, free = distances[free >= 1], free[free >= 1]
    t = (distances + slack) / std
    tails = special.chdtr(free, t * t)
    nearest = float(np.min(distances / std)) if tails.size else math.inf
    if not tails.size:
        return unverifiable("fresh-noise", "the earlier updates span the sketch", speaks_to=FRESH)
    p_value = min(1.0, len(tails) * float(np.min(tails)))
    statistic = {"distance_in_noise_stds": nearest, "sketch_width": float(sketches.width),
                 "earlier_rounds": float(len(earlier))}
    return decide("fresh-noise", p_value, ALPHA, statistic,
                  passed=f"the update is {nearest:.4g} noise stds from its earlier updates' span",
                  failed=f"the update is only {nearest:.4g} noise stds from the span of this "
                         "client's earlier updates: its noise is not fresh (reused, cancelling "
                         "or a perturbed replay)", speaks_to=FRESH)


def _history(dim: int, seed: int) -> tuple[UpdateSketches, list[tuple[int, np.ndarray, float,
                                                                        float]]]:
    """Sketches of a run's earlier rounds and the next round's tests of a mixed batch."""
    rng = np.random.default_rng(seed)
    sketches = UpdateSketches(dim, seed=seed)
    rounds = {0: 0, 1: 1, 2: 3, 3: 3, 4: 3, 5: SPAN_ROUNDS + 4, 6: 3, 7: 2, 8: 2, 9: 3, 10: 3,
              11: 25}
    noise = {cid: rng.standard_normal(dim) for cid in rounds}
    signal = rng.standard_normal(dim) * 3
    for cid, count in rounds.items():
        for rnd in range(count):
            update = signal + (rng.standard_normal(dim) if cid != 7 else noise[cid])
            if cid == 6:  # rank-deficient: the same update every round
                update = signal + noise[cid]
            if cid == 8:  # z then −z
                update = signal + (-1) ** rnd * noise[cid]
            sketches.add(rnd, cid, update)
    tests = []
    for cid in rounds:
        update = signal + rng.standard_normal(dim)
        if cid in (6, 7):
            update = signal + noise[cid]  # reused noise
        if cid == 8:
            update = signal + noise[cid]
        std = 0.0 if cid == 9 else 1.0
        tests.append((cid, update, std, 1e-6 * cid))
    tests.append((12, rng.standard_normal(dim), 1.0, 0.0))  # a new client
    return sketches, tests


def test_a_rounds_tests_at_once_are_each_ones_alone():
    for dim, seed in ((3_000, 0), (4_000, 1), (20, 2)):  # 20: 25 rounds span the sketch
        sketches, tests = _history(dim, seed)
        batch = sketches.fresh_noise_tests(tests, alpha=ALPHA)
        alone = [_one_at_a_time(sketches, *test) for test in tests]
        assert batch == alone, dim
        assert ("span the sketch" in batch[11].reason) is (dim == 20)
        assert [sketches.fresh_noise_tests([t], alpha=ALPHA)[0] for t in tests] == alone
    sketches, tests = _history(3_000, 0)
    statuses = [v.status for v in sketches.fresh_noise_tests(tests, alpha=ALPHA)]
    assert statuses[6:10] == ["inconsistent"] * 3 + ["unverifiable"]
    assert statuses[:6] == ["consistent"] * 6 and statuses[10:] == ["consistent"] * 3


def test_a_group_is_factorised_a_chunk_at_a_time(monkeypatch):
    """A group larger than ``_FRESH_CHUNK`` (memory bound) gives each reply the verdict it
    gets alone: chunks of 2 over groups of 1 to 6 replies."""
    monkeypatch.setattr("fedpriv.verification.replay._FRESH_CHUNK", 2)
    sketches, tests = _history(3_000, 0)
    alone = [_one_at_a_time(sketches, *test) for test in tests]
    assert sketches.fresh_noise_tests(tests, alpha=ALPHA) == alone
