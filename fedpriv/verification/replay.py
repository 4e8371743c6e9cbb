"""Replayed updates and fresh noise: a client's successive releases must not share noise.

**Replays.** A replay passes every test of the update against its declared noise — it *is* a
genuine noisy release, just not a fresh one — yet it adds no new information and breaks the
accounting (the same noise, counted twice). The server keeps, per client, a sketch ``y = RΔ``
of every accepted update and calls a new update a replay when its sketch matches an earlier one
to a relative ``1e-3`` (float32 round trips of θ + Δ move it by ~1e-7).

**Fresh noise** (:meth:`UpdateSketches.fresh_noise_tests`, issue 25 item 4). Reusing the noise
(``z`` every round), cancelling it (``z`` then ``−z``, so the server's sum sees none) or
replaying a perturbed update all make the new update close to the *span* of the client's
earlier ones. Honest Gaussian noise cannot be: write the new update ``Δ = X + c·N_k`` with
``N_k ~ N(0, s²I)`` the last local step's noise (``s = σC``), ``c ≥ η/L`` its coefficient in
``Δ`` (``η/L`` for SGD with or without momentum and weight decay, ``η(1+μ)/L`` with Nesterov)
and ``X`` everything else — the clipped signals, the earlier steps' noise, and every earlier
round, all drawn before ``N_k``. ``R`` has orthonormal rows, so ``RN_k ~ N(0, s²I_m)``; with
``P`` the projection onto the complement of the span of the earlier sketches (dimension
``m − d``, fixed before ``N_k`` is drawn), ``{y : ‖Py‖ ≤ t}`` is a symmetric convex set and
Anderson's theorem (Proc. AMS 6, 1955, Thm 1) gives, whatever ``X`` is,

``P(‖P·RΔ‖ ≤ t) ≤ P(c·s·χ_{m−d} ≤ t) ≤ P((η/L)·s·χ_{m−d} ≤ t)``:

reject when the distance of the new sketch from the span is below the ``α`` quantile of
``(η/L)·s·χ_{m−d}`` (false-alarm rate ≤ α for every signal and every history). Its power does
not depend on the signal bound ``C·B`` directly: reused noise leaves only the signals'
difference, ``‖R(S_r − S_j)‖``, about ``√(m/p)·‖S_r − S_j‖`` for a sketch independent of the
data, against a threshold ``(η/L)·s·(√(m−d) − 3.6)`` at α = 10⁻⁶ — caught while the signals'
difference is below roughly ``√p`` times the noise std; a replay perturbed by 1% of its norm
is at distance ≈ 1% of ``‖RΔ‖``, far below the threshold.

The sketch is a *normalised* count sketch (Charikar, Chen & Farach-Colton 2002): coordinate
``i`` goes to bucket ``h(i)`` with sign ``ξ_i``, each bucket divided by the square root of its
size, so the rows of ``R`` are orthonormal (disjoint supports, unit norms) — O(p) time and
memory for any model size, and linear, so equal updates have equal sketches. Buckets are
balanced (a random permutation taken modulo ``m``): none is empty while ``p ≥ m``.

Everything the class remembers of an accepted update is the *entry* :meth:`UpdateSketches.add`
returns (named arrays); :meth:`UpdateSketches.remember` rebuilds the memory from it. The server
stores each entry with the round (the audit store's ``memory`` table), so ``--resume`` rebuilds
exactly the memory of an uninterrupted run whatever ``audit.store_updates`` kept — a field added
to the per-client memory must travel in the entry.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import cast

import numpy as np
from scipy import sparse, special

from fedpriv.verification.verdict import DEFAULT_ALPHA, Verdict, decide, unverifiable

FRESH = ("fresh-noise",)  # the property the test speaks to (Verdict.speaks_to)

__all__ = ["SKETCH_WIDTH", "SPAN_ROUNDS", "UpdateSketches", "distance_from_span",
           "distances_from_lines", "distances_from_spans"]

SKETCH_WIDTH = 256
"""``m``: rows of the sketch. Power needs ``m − d`` well above the χ quantile's gap (≈ 3.6 at
α = 10⁻⁶); memory is ``8m`` bytes (float64) per client-round."""
SPAN_ROUNDS = 32
"""``d``: the latest rounds whose span the new update is tested against jointly; each older
round is tested on its own (Bonferroni over all the comparisons)."""
_TOLERANCE = 1e-3
_FIRST = Verdict("fresh-noise", "consistent", "the client's first accepted update: no earlier "
                 "release to share noise with", p_value=1.0, speaks_to=FRESH)


class UpdateSketches:
    """Sketches of each client's accepted updates: replays and fresh noise.

    Parameters
    ----------
    dim
        The update's length ``p``.
    seed
        Seed of the sketch's buckets and signs (the run's seed: a resumed run rebuilds them).
    """

    def __init__(self, dim: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 0x5E7C])
        self.width = min(SKETCH_WIDTH, int(dim))
        bucket = rng.permutation(dim) % self.width
        sizes = np.bincount(bucket, minlength=self.width).astype(np.float64)
        weight = rng.choice(np.array([-1.0, 1.0]), size=dim) / np.sqrt(sizes)[bucket]
        # R as a sparse matrix, each row's entries in coordinate order: a row of R·Δ is then
        # summed in that order, from 0, one rounded product at a time — what np.bincount of
        # the products does, in ~2/3 of its time
        self._sketcher = sparse.csr_matrix((weight, (bucket, np.arange(dim))),
                                           shape=(self.width, dim))
        self._sketcher.sort_indices()
        self._seen: dict[int, list[tuple[int, np.ndarray]]] = {}
        self._recent: dict[int, np.ndarray] = {}  # id(update) -> its sketch, while it lives

    def sketch(self, update: np.ndarray) -> np.ndarray:
        """``R·Δ`` for a flat update (float64; ``R`` has orthonormal rows)."""
        return self._sketcher @ update.astype(np.float64)

    def _remembered_sketch(self, update: np.ndarray) -> np.ndarray:
        """:meth:`sketch`, reusing :meth:`replay_of`'s of the same array (a sketch is a pass):
        a round's replies are checked as a batch, each one's sketch kept while its array
        lives (dropped when it is collected, so an id is never reused stale)."""
        known = self._recent.get(id(update))
        return self.sketch(update) if known is None else known

    def replay_of(self, client_id: int, update: np.ndarray) -> int | None:
        """The round whose update this one repeats, or None (then nothing is recorded)."""
        return self.replays_of([client_id], [update])[0]

    def replays_of(
        self, client_ids: Sequence[int], updates: Sequence[np.ndarray]
    ) -> list[int | None]:
        """:meth:`replay_of` of each client's update, in order: every earlier sketch of
        every client compared at once (a round's batch: one pass instead of one per reply).
        Each sketch is kept while its array lives, for :meth:`fresh_noise_tests` and
        :meth:`add` (a sketch is a pass; dropped when the array is collected, so an id is
        never reused stale)."""
        news = []
        for update in updates:
            new = self._remembered_sketch(update)
            key = id(update)
            if key not in self._recent:
                weakref.finalize(update, self._recent.pop, key, None)
                self._recent[key] = new
            news.append(new)
        found: list[int | None] = [None] * len(news)
        owners: list[int] = []
        rounds: list[int] = []
        olds: list[np.ndarray] = []
        for i, client_id in enumerate(client_ids):
            for rnd, old in self._seen.get(client_id, ()):
                owners.append(i)
                rounds.append(rnd)
                olds.append(old)
            if len(olds) >= _COMPARED or i == len(client_ids) - 1:
                _first_matches(news, owners, rounds, olds, found)
                owners, rounds, olds = [], [], []
        return found

    def fresh_noise_tests(self, tests: Sequence[tuple[int, np.ndarray, float, float]], *,
                          alpha: float = DEFAULT_ALPHA) -> list[Verdict]:
        """Test ``fresh-noise`` of each ``(client_id, update, noise_std, slack)``, a round's
        replies (issue 37): is the new update far enough from the span of the client's
        earlier ones for its last step's noise to be fresh? (module docstring) The spans of
        the updates whose clients have as many earlier rounds are found together,
        :data:`_FRESH_CHUNK` at a time (:func:`distances_from_spans`): the same verdicts as
        one at a time.

        Parameters
        ----------
        tests
            ``client_id``: whose earlier updates to compare with; ``update``: the new flat
            update ``Δ``; ``noise_std``: ``(η/L)·σC``, the std per coordinate of the last
            step's noise as it enters ``Δ`` (a lower bound on it is enough); ``slack``: a
            bound on ``Δ``'s rounding error in ℓ2 (widens the distance).
        alpha
            False-alarm rate.
        """
        out: list[Verdict | None] = [None] * len(tests)
        groups: dict[int, list[int]] = {}  # number of earlier rounds -> tests
        for i, (client_id, _, noise_std, _) in enumerate(tests):
            earlier = len(self._seen.get(client_id, ()))
            if not earlier:  # vacuously fresh: deterministic, never a false alarm
                out[i] = _FIRST
            elif not noise_std > 0 or not math.isfinite(noise_std):
                out[i] = unverifiable("fresh-noise", "no Gaussian noise declared",
                                      speaks_to=FRESH)
            else:
                groups.setdefault(earlier, []).append(i)
        for count, group in groups.items():
            for start in range(0, len(group), _FRESH_CHUNK):
                where = group[start:start + _FRESH_CHUNK]
                for i, verdict in zip(where, self._fresh_chunk(tests, where, count, alpha),
                                      strict=True):
                    out[i] = verdict
        return cast(list[Verdict], out)  # every test has its verdict

    def _fresh_chunk(self, tests: Sequence[tuple[int, np.ndarray, float, float]],
                     where: list[int], count: int, alpha: float) -> list[Verdict]:
        """The verdicts of ``tests[i]`` for ``i`` in ``where`` (at most :data:`_FRESH_CHUNK`),
        whose clients all have ``count`` earlier rounds: their spans found together."""
        # np.array, not np.stack: the same array, a quarter of the time per sketch
        news = np.array([self._remembered_sketch(tests[i][1]) for i in where])
        rows = np.array([y for i in where for _, y in self._seen[tests[i][0]][-SPAN_ROUNDS:]])
        spans, ranks = distances_from_spans(news, rows.reshape(len(where), -1, self.width))
        distances, dims = spans[:, None], ranks[:, None]
        if count > SPAN_ROUNDS:  # each older round alone: one line each, all at once
            lines = [distances_from_lines(news[j], np.stack(
                [y for _, y in self._seen[tests[i][0]][:-SPAN_ROUNDS]]))
                for j, i in enumerate(where)]
            distances = np.hstack([distances, np.stack([far for far, _ in lines])])
            dims = np.hstack([dims, np.stack([line for _, line in lines])])
        return self._fresh_verdicts(distances, dims, [tests[i][2:] for i in where], count, alpha)

    def _fresh_verdicts(self, distances: np.ndarray, ranks: np.ndarray,
                        scales: list[tuple[float, float]], earlier: int,
                        alpha: float) -> list[Verdict]:
        """The fresh-noise verdicts of updates from their ``(n, k)`` distances from their
        earlier updates' span (and older lines) of dimensions ``ranks``, at their
        ``(noise_std, slack)``: one χ tail per distance of fewer dimensions than the sketch,
        Bonferroni over them (elementwise, as one update at a time)."""
        stds, slacks = (np.array(column)[:, None] for column in zip(*scales, strict=True))
        free = self.width - ranks
        valid = free >= 1
        t = (distances + slacks) / stds
        tails = np.where(valid, special.chdtr(free, t * t), np.inf)  # a χ² tail each
        nearest = np.min(np.where(valid, distances / stds, np.inf), axis=1).tolist()
        least, tested = np.min(tails, axis=1).tolist(), valid.sum(axis=1).tolist()
        return [self._fresh_verdict(*found, earlier, alpha)
                for found in zip(nearest, least, tested, strict=True)]

    def _fresh_verdict(self, nearest: float, least: float, tested: int, earlier: int,
                       alpha: float) -> Verdict:
        """One update's fresh-noise verdict from its least distance in noise stds, its least
        χ tail and the number of tails (none: the earlier updates span the sketch)."""
        if not tested:
            return unverifiable("fresh-noise", "the earlier updates span the sketch",
                                speaks_to=FRESH)
        p_value = min(1.0, tested * least)
        statistic = {"distance_in_noise_stds": nearest, "sketch_width": float(self.width),
                     "earlier_rounds": float(earlier)}
        return decide(
            "fresh-noise", p_value, alpha, statistic,
            passed=f"the update is {nearest:.4g} noise stds from its earlier updates' span",
            failed=f"the update is only {nearest:.4g} noise stds from the span of this "
                   "client's earlier updates: its noise is not fresh (reused, cancelling or "
                   "a perturbed replay)",
            speaks_to=FRESH,
        )

    def add(self, rnd: int, client_id: int, update: np.ndarray) -> dict[str, np.ndarray]:
        """Remember an accepted update; return the entry that :meth:`remember` rebuilds the
        same memory from."""
        entry = {"sketch": self._remembered_sketch(update)}
        self.remember(rnd, client_id, entry)
        return entry

    def remember(self, rnd: int, client_id: int, entry: dict[str, np.ndarray]) -> None:
        """Remember an accepted update from its entry (:meth:`add`; ``--resume``).

        Raises
        ------
        ValueError
            The entry holds no finite sketch of this width (a store written with another
            model, or altered).
        """
        sketch = np.asarray(entry.get("sketch"), np.float64)
        if sketch.shape != (self.width,) or not np.isfinite(sketch).all():
            raise ValueError(f"an update's sketch must be {self.width} finite numbers, not "
                             f"an array of shape {list(sketch.shape)}")
        self._seen.setdefault(client_id, []).append((rnd, sketch))


def distances_from_lines(vector: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distance_from_span` of ``vector`` from each row's line alone, for all rows at
    once: ``‖v − (⟨r, v⟩/‖r‖²)·r‖₂`` and dimension 1, or ``‖v‖₂`` and 0 for a zero row — the
    same projection as one QR per row, to rounding (a few ulps of ``‖v‖``), in one pass over
    the rows instead of a factorisation each (the fresh-noise test's rounds older than
    :data:`SPAN_ROUNDS`: one per earlier round, per reply)."""
    peaks = np.abs(rows).max(axis=1)
    spans = peaks > 0.0  # each row scaled to a largest entry of 1: no square under- or overflows
    lines = np.divide(rows, peaks[:, None], out=np.zeros_like(rows), where=spans[:, None])
    squares = np.einsum("ij,ij->i", lines, lines)
    weights = np.divide(lines @ vector, squares, out=np.zeros_like(squares), where=spans)
    residuals = vector[None, :] - weights[:, None] * lines
    return np.sqrt(np.einsum("ij,ij->i", residuals, residuals)), spans.astype(np.int64)


def distance_from_span(vector: np.ndarray, rows: np.ndarray) -> tuple[float, int]:
    """``‖P⊥ v‖₂`` for the span of the rows kept and that span's dimension. A QR factorisation
    (O(m·d²)); columns that add almost nothing (``|R_jj| ≤ 10⁻¹⁰ max``) are left out. Any
    subspace computed from the earlier rounds alone keeps the test valid with ``χ_{m − d}``,
    ``d`` its dimension (module docstring), so the choice affects power only."""
    distances, ranks = distances_from_spans(vector[None, :], rows[None])
    return float(distances[0]), int(ranks[0])


def distances_from_spans(vectors: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distance_from_span` of each ``vectors[i]`` (``(n, m)``) from the span of its
    ``rows[i]`` (``(n, d, m)``), all at once: one stacked QR and stacked products instead of
    a factorisation and two products per vector (LAPACK and BLAS still run matrix by matrix,
    so each distance is the one a call of its own gives, bit for bit)."""
    q, r = np.linalg.qr(rows.transpose(0, 2, 1))
    diag = np.abs(np.diagonal(r, axis1=1, axis2=2))
    top = diag.max(axis=1, initial=0.0)
    keep = (diag > 1e-10 * top[:, None]) & (top > 0)[:, None]
    # each basis laid out as a selection of its columns is (Fortran order): the same BLAS
    # kernels, hence the same rounding, as one vector at a time
    bases = np.ascontiguousarray(q.transpose(0, 2, 1))
    coefficients = np.matmul(bases, vectors[..., None])
    residual = vectors - np.matmul(bases.transpose(0, 2, 1), coefficients)[..., 0]
    for i in np.flatnonzero(~keep.all(axis=1)):  # columns left out: that span's own basis
        basis = q[i][:, keep[i]]
        residual[i] = vectors[i] - basis @ (basis.T @ vectors[i])
    return np.sqrt(np.vecdot(residual, residual)), keep.sum(axis=1)


_FRESH_CHUNK = 128
"""Replies :meth:`UpdateSketches.fresh_noise_tests` factorises at once (of one group: as many
earlier rounds each). Each holds its earlier sketches, their QR factor and its basis, up to
:data:`SPAN_ROUNDS` × :data:`SKETCH_WIDTH` float64 each (64 KiB): ~200 KiB per reply, so
~25 MiB per chunk whatever the round's size — the whole group at once was 1 GiB for 5,000
replies, and no faster (LAPACK and BLAS run matrix by matrix anyway)."""

_COMPARED = 4_096
"""Earlier sketches :meth:`UpdateSketches.replays_of` compares at once (whole clients, so a
block can exceed it by one client's rounds): 4,096 × 256 float64 is 8 MB, about three times
that with the gaps and the new sketches, whatever the round's size and the run's length."""


def _first_matches(news: Sequence[np.ndarray], owners: Sequence[int], rounds: Sequence[int],
                   olds: Sequence[np.ndarray], found: list[int | None]) -> None:
    """Write into ``found[owner]`` the first round whose sketch in ``olds`` (each client's in
    order) ``news[owner]`` repeats to within :data:`_TOLERANCE`: every row compared on its own,
    so a block's verdicts are those of any other blocking."""
    if not olds:
        return
    earlier = np.stack(olds)
    gaps = earlier - np.stack(news)[list(owners)]
    scales = np.sqrt(np.einsum("ij,ij->i", earlier, earlier))
    close = (scales > 0) & (np.sqrt(np.einsum("ij,ij->i", gaps, gaps)) <= _TOLERANCE * scales)
    for k in np.flatnonzero(close)[::-1].tolist():  # backwards: each client's first match
        found[owners[k]] = rounds[k]
