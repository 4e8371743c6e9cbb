"""How many records ``B = Σ_t B_t`` a client-round used, as far as the server can bound it.

The signal in an update is bounded by clipping, ``‖Σ_t S_t‖ ≤ C·B`` (privacy-math.md §9), and
``B`` is what the server does not see. A :class:`RecordCount` is the law of ``B`` the
declaration implies, always a Binomial (a known count is ``Binomial(B, 1)``):

* declared batch sizes ``B_1 … B_k``: ``B = Σ_t B_t`` is known (a claim, like the rest);
* fixed-size batches of ``L`` records: ``B = k·L`` is known;
* Poisson sampling with rate ``q`` from ``n`` local records: each of the ``k·n``
  (step, record) pairs is drawn independently with probability ``q``, so
  ``B ~ Binomial(k·n, q)`` exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from scipy import stats

from fedpriv.errors import InputError
from fedpriv.validate import check_dim, check_rate

__all__ = ["SAMPLINGS", "RecordCount", "record_count"]

SAMPLINGS = ("poisson", "fixed")


@dataclass(frozen=True)
class RecordCount:
    """``B ~ Binomial(trials, rate)``; ``rate = 1`` means ``B = trials`` is known.

    Attributes
    ----------
    trials, rate
        The Binomial parameters.
    source
        Where the law comes from, for the verdict (``"declared batch sizes"``, …).
    """

    trials: int
    rate: float
    source: str

    @property
    def known(self) -> bool:
        """Whether ``B`` is a known number (no probability is spent bounding it)."""
        return self.rate == 1.0

    def exceed_probability(self, records: int) -> float:
        """``P(B > records)``."""
        return binomial_sf(records, self.trials, self.rate)

    def upper_quantile(self, beta: float) -> int:
        """The least ``b`` with ``P(B > b) ≤ beta`` (``trials`` when ``B`` is known)."""
        return _binomial_isf(beta, self.trials, self.rate)


@lru_cache(maxsize=4096)
def _binomial_isf(beta: float, trials: int, rate: float) -> int:
    """``scipy.stats.binom.isf``, kept: it depends on the declaration alone (``k·n``, ``q``)
    and the level, which the replies of a round share; each call costs ~100 µs of scipy's
    argument handling, more than the rest of a reply's verification."""
    return int(stats.binom.isf(beta, trials, rate))


@lru_cache(maxsize=4096)
def binomial_cdf(records: int, trials: int, rate: float) -> float:
    """``scipy.stats.binom.cdf``, kept like :func:`binomial_sf` (declared batch sizes take
    few distinct values)."""
    return float(stats.binom.cdf(records, trials, rate))


@lru_cache(maxsize=4096)
def binomial_sf(records: int, trials: int, rate: float) -> float:
    """``scipy.stats.binom.sf``, kept: the replies of a round share ``(trials, rate)`` and the
    bisections of :func:`~fedpriv.verification.sandwich.one_sided_p_value` start alike."""
    return float(stats.binom.sf(records, trials, rate))


def record_count(
    steps: int,
    *,
    batch_sizes: Sequence[int] | None = None,
    sampling: str = "poisson",
    local_size: int | None = None,
    sample_rate: float | None = None,
) -> RecordCount:
    """The law of ``B`` for a declaration, from the most specific information given.

    Parameters
    ----------
    steps
        Local steps ``k``.
    batch_sizes
        Declared ``B_1 … B_k``; when given, ``B`` is their sum.
    sampling
        ``"poisson"`` or ``"fixed"``.
    local_size, sample_rate
        ``n`` and ``q``; the expected batch is ``L = q·n`` (an integer for fixed-size batches).

    Raises
    ------
    InputError
        On a malformed argument (check the declaration first with
        :func:`fedpriv.verification.check_declaration`).
    """
    k = check_dim("steps", steps)
    if batch_sizes is not None:
        if len(batch_sizes) != k:
            raise InputError("batch_sizes", batch_sizes, f"{k} batch sizes, one per step")
        total = sum(check_dim("batch_sizes", b, minimum=0) for b in batch_sizes)
        return RecordCount(total, 1.0, "declared batch sizes")
    if sampling not in SAMPLINGS:
        raise InputError("sampling", sampling, f"one of {SAMPLINGS}")
    n = check_dim("local_size", local_size)
    q = check_rate("sample_rate", sample_rate)
    if sampling == "fixed":
        batch = q * n
        if not math.isclose(batch, round(batch), rel_tol=1e-9):
            raise InputError("sample_rate", sample_rate, "q·n an integer for fixed-size batches")
        return RecordCount(k * round(batch), 1.0, "fixed-size batches")
    return RecordCount(k * n, q, f"Binomial(k·n = {k * n}, q = {q:.6g}) under Poisson sampling")
