"""What a client declares about one round, and whether the declaration can be true at all.

A :class:`Declaration` is data from the client, not configuration: a malformed value is
evidence, so :func:`check_declaration` returns an ``inconsistent`` verdict for it instead of
raising. What no update can confirm — the local size ``n``, hence ``q`` — stays declared
(privacy-math.md §9); but declared batch sizes must be plausible under ``Binomial(n, q)``
(:func:`check_batch_sizes`), so a client cannot account with a small ``q`` while sampling
large batches.

The declaration holds what every mechanism shares; what only one mechanism has (its noise
parameters) is checked where it is declared — the mechanism's parameter checks when the report
is read — and tested by the mechanism's own ``verify``, which the server passes to
:func:`~fedpriv.verification.registry.verify_update`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.validate import check_dim, check_probability, check_rate
from fedpriv.verification.records import SAMPLINGS, binomial_cdf, binomial_sf
from fedpriv.verification.verdict import DEFAULT_ALPHA, Verdict, decide

__all__ = ["Declaration", "check_batch_sizes", "check_declaration", "declaration_checks"]


@dataclass(frozen=True)
class Declaration:
    """One client-round's declaration, in plain numbers, the same for every mechanism.

    Attributes
    ----------
    sensitivity
        The mechanism's overall bound ``C`` on one record's contribution (ℓ1 for ``laplace``;
        ``sqrt(Σ C_r²)`` or ``Σ C_r`` under per-layer clipping; ``inf`` for ``none``).
    lr, steps
        ``η`` and ``k``.
    batch_size
        ``L``, the expected batch the release is divided by: ``q·n``.
    local_size, sample_rate
        ``n`` and ``q``.
    sampling
        ``"poisson"`` or ``"fixed"``.
    batch_sizes
        ``B_1 … B_k`` if the client reports them.
    optimizer, fresh_state
        The local optimiser (``torch.optim.SGD`` semantics; see
        :func:`~fedpriv.verification.update.client_update`) and whether its state is created
        afresh every round.
    """

    sensitivity: float
    lr: float
    steps: int
    batch_size: float
    local_size: int
    sample_rate: float
    sampling: str = "poisson"
    batch_sizes: tuple[int, ...] | None = None
    optimizer: OptimizerSettings = OptimizerSettings()
    fresh_state: bool = True


def _is_int(value: object, minimum: int) -> bool:
    try:
        return not isinstance(value, bool) and float(value) == int(value) >= minimum  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return False


def _is_number(
    value: object, low: float, high: float = math.inf, *, open_low: bool = False
) -> bool:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return False
    return math.isfinite(v) and (v > low if open_low else v >= low) and v <= high


def _positive(value: object) -> bool:
    """``value > 0``, infinity included (the sensitivity of a mechanism that bounds nothing)."""
    try:
        return float(value) > 0  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return False


def _problems(d: Declaration) -> list[str]:
    """Every way the declaration cannot be true."""
    checks = [
        (d.sampling in SAMPLINGS, f"sampling {d.sampling!r} is not one of {SAMPLINGS}"),
        (_is_int(d.steps, 1), f"steps = {d.steps!r} is not an integer ≥ 1"),
        (_is_int(d.local_size, 1), f"local size n = {d.local_size!r} is not an integer ≥ 1"),
        (_is_number(d.sample_rate, 0, 1, open_low=True), f"q = {d.sample_rate!r} ∉ (0, 1]"),
        (_is_number(d.lr, 0, open_low=True), f"learning rate {d.lr!r} is not > 0"),
        (_is_number(d.batch_size, 0, open_low=True), f"L = {d.batch_size!r} is not > 0"),
        (_is_number(d.optimizer.momentum, 0, 1), f"momentum {d.optimizer.momentum!r} ∉ [0, 1)"),
        (_is_number(d.optimizer.weight_decay, 0),
         f"weight decay {d.optimizer.weight_decay!r} is not ≥ 0"),
        (_positive(d.sensitivity), f"C = {d.sensitivity!r} ≤ 0"),
    ]
    found = [message for ok, message in checks if not ok]
    if found:
        return found
    if d.optimizer.momentum >= 1:
        found.append(f"momentum {d.optimizer.momentum} ∉ [0, 1)")
    if not math.isclose(d.batch_size, d.sample_rate * d.local_size, rel_tol=1e-9):
        found.append(f"L = {d.batch_size} is not q·n = {d.sample_rate * d.local_size}")
    if d.sampling == "fixed" and not _is_int(d.batch_size, 1):
        found.append(f"fixed-size batches need an integer L, got {d.batch_size}")
    if d.batch_sizes is not None:
        found += _batch_problems(d)
    return found


def _batch_problems(d: Declaration) -> list[str]:
    sizes = d.batch_sizes or ()
    if len(sizes) != d.steps:
        return [f"{len(sizes)} batch sizes declared for k = {d.steps} steps"]
    if not all(_is_int(b, 0) and b <= d.local_size for b in sizes):
        return [f"batch sizes {list(sizes)} are not integers in [0, n = {d.local_size}]"]
    if d.sampling == "fixed" and any(b != d.batch_size for b in sizes):
        return [f"fixed-size batches of L = {d.batch_size}, but batch sizes {list(sizes)}"]
    return []


def check_declaration(declaration: Declaration) -> Verdict:
    """``inconsistent`` (p = 0) with every problem found if the declaration cannot be true,
    else ``consistent`` (no p-value: nothing was tested). Checked: known
    sampling, ``k ≥ 1`` and ``n ≥ 1`` integers, ``q ∈ (0, 1]``, ``L = q·n`` (relative 10⁻⁹),
    ``η > 0``, ``C > 0``, momentum in ``[0, 1)``, and declared batch
    sizes: ``k`` integers in ``[0, n]``, all ``L`` for fixed-size batches."""
    problems = _problems(declaration)
    if problems:  # p = 0: impossible under the declaration
        return Verdict("declaration", "inconsistent", "; ".join(problems), p_value=0.0)
    return Verdict("declaration", "consistent", "plausible: the declared settings agree with "
                   "one another (the size n is checked by size-sampling where the server knows it)")


def check_batch_sizes(
    batch_sizes: Sequence[int],
    *,
    local_size: int,
    sample_rate: float,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """Exact two-sided test of ``Σ_t B_t ~ Binomial(k·n, q)`` under Poisson sampling.

    p-value ``min(1, 2·min(P(X ≤ x), P(X ≥ x)))``, ``X ~ Binomial(k·n, q)`` — the doubled
    smaller tail, valid for discrete laws. Catches a client that accounts with a sampling rate
    smaller than the one it sampled with (given its declared ``n``).
    """
    k = len(batch_sizes)
    n = check_dim("local_size", local_size)
    q = check_rate("sample_rate", sample_rate)
    a = check_probability("alpha", alpha)
    total = sum(check_dim("batch_sizes", b, minimum=0) for b in batch_sizes)
    low = binomial_cdf(total, k * n, q)  # kept per (total, k·n, q): replies repeat them
    high = binomial_sf(total - 1, k * n, q)
    statistic = {"records": float(total), "expected": k * n * q}
    return decide(
        "batch-sizes",
        min(1.0, 2.0 * min(low, high)),
        a,
        statistic,
        passed=f"{total} records over {k} steps fit q = {q:.4g}, n = {n}",
        failed=f"{total} records over {k} steps do not fit q = {q:.4g}, n = {n} (expected "
        f"{k * n * q:.4g})",
        speaks_to=("size-sampling",),
        refutes_only=True,  # n is declared: fitting q at it does not verify n
    )


def declaration_checks(declaration: Declaration, alpha: float) -> list[Verdict]:
    """The preconditions every client-round verdict starts from: the declaration is possible
    (:func:`check_declaration`) and declared Poisson batch sizes fit ``Binomial(k·n, q)``
    (:func:`check_batch_sizes`, at ``alpha``); the first alone when it fails (nothing else of
    an impossible declaration is worth testing)."""
    d = declaration
    plausible = check_declaration(d)
    if plausible.status == "inconsistent" or d.batch_sizes is None or d.sampling != "poisson":
        return [plausible]
    return [plausible, check_batch_sizes(d.batch_sizes, local_size=d.local_size,
                                         sample_rate=d.sample_rate, alpha=alpha)]
