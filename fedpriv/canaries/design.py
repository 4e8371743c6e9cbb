"""Gradient canaries: known signals with secret random inclusion (privacy-math.md §10).

A canary is an extra record of one client whose clipped gradient is fixed in advance:
``c_j = C·d_j``, ``d_j`` a unit vector of R^p in the mechanism's clipping norm (ℓ2 for
``gaussian``, ``vmf`` and ``clip``; ℓ1 for ``laplace``), ``j = 1..m``. Canary ``j`` is *in*
with probability ½, independently. Directions and inclusion bits are deterministic functions of
a seed that the auditing server and the client share (e.g.
``fedpriv.seeding.derive_seed(run_seed, client, round, "canaries")``), so the server
can score canaries without any raw data.

Insertion (every local step): the client adds ``Σ_{j in} c_j`` — :func:`canary_sum` — to its
clipped sum ``Σ_i ḡ_i`` before the mechanism adds noise, in every local step. The augmented
batch has expected size ``L' = L + m/2`` (:func:`augmented_batch_size`); the divisor is public
post-processing, so dividing by ``L'`` with learning rate ``η·L'/L`` (or by ``L`` with ``η``,
the same update) keeps the training dynamics — only a divisor that depended on the realised
number of in-canaries would leak the secret bits. With ``rate < 1`` each in-canary instead
joins each step with probability ``rate`` from the client's private generator, exactly like a
Poisson-sampled record.

Kinds: ``coordinate`` canaries (the default) are ``±e_i`` on distinct coordinates — the
"Dirac" gradient canaries of Nasr et al. (2023): exactly orthogonal, so no canary disturbs
another's score and, with Gaussian or Laplace noise, the scores of one release are independent
given the bits; scored in ``O(m)``; and against per-coordinate Laplace noise the most powerful
shape (the whole ℓ1 budget on one coordinate). ``random`` directions are normalised standard
normal vectors (ℓ2, or ℓ1-normalised for ``norm=1``): the data's share of a score,
``⟨Σ_i ḡ_i, d_j⟩``, is then spread evenly (``≈ ‖Σ_i ḡ_i‖/√p``) rather than depending on how
large the data gradient is on one coordinate; they interfere slightly (``⟨d_j, d_l⟩ ≈ ±1/√p``)
and cost ``O(m·p)`` to generate and score. Random directions are drawn in blocks
of :data:`BLOCK` canaries, each block from its own ``SeedSequence``, so memory stays
``O(BLOCK·p)`` for any ``m``.

References
----------
.. [1] M. Nasr et al., "Tight auditing of differentially private machine learning", USENIX
   Security 2023 (white-box "Dirac" gradient canaries).
.. [2] T. Steinke, M. Nasr, M. Jagielski, "Privacy auditing with one (1) training run",
   NeurIPS 2023, arXiv:2305.08846 (many canaries, each in independently with probability ½).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fedpriv.errors import InputError
from fedpriv.validate import check_choice, check_dim, check_positive, check_rate

__all__ = [
    "BLOCK",
    "KINDS",
    "CanaryDesign",
    "augmented_batch_size",
    "canary_displacement",
    "canary_sum",
    "coordinates",
    "direction_blocks",
    "directions",
    "inclusion",
]

KINDS = ("coordinate", "random")
BLOCK = 256
"""Canaries per random-direction block (one generator each)."""

_INCLUSION, _DIRECTION, _COORDINATE = 1, 2, 3  # SeedSequence stream ids


@dataclass(frozen=True)
class CanaryDesign:
    """What the auditor and the client share: everything else follows from it.

    Attributes
    ----------
    seed
        Non-negative integer shared by the server and the client (secret from everyone else).
    count
        Number of canaries ``m``; about ``m/2`` are in.
    dim
        Model dimension ``p``.
    clip
        Clipping bound ``C`` of the mechanism (the canary norm).
    kind
        ``"random"`` or ``"coordinate"`` (module docstring).
    norm
        Clipping norm of the mechanism: 2 (Gaussian, VMF, clip) or 1 (Laplace).
    """

    seed: int
    count: int
    dim: int
    clip: float
    kind: str = "coordinate"
    norm: int = 2

    def __post_init__(self) -> None:
        fields = {
            "seed": check_dim("canaries.seed", self.seed, minimum=0),
            "count": check_dim("canaries.count", self.count),
            "dim": check_dim("canaries.dim", self.dim, minimum=2),
            "clip": check_positive("canaries.clip", self.clip),
            "kind": check_choice("canaries.kind", self.kind, KINDS),
        }
        if self.norm not in (1, 2) or isinstance(self.norm, bool):
            raise InputError("canaries.norm", self.norm, "1 (Laplace) or 2")
        fields["norm"] = int(self.norm)
        if fields["kind"] == "coordinate" and fields["count"] > fields["dim"]:
            raise InputError("canaries.count", self.count,
                             f"at most dim = {self.dim} coordinate canaries")
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def generator(self, stream: int, *key: int) -> np.random.Generator:
        """The generator of one stream (inclusion bits, directions, coordinates) and block."""
        return np.random.default_rng(np.random.SeedSequence((self.seed, stream, *key)))


def inclusion(design: CanaryDesign) -> np.ndarray:
    """The secret bits: ``True`` where canary ``j`` is in (each with probability ½)."""
    return design.generator(_INCLUSION).integers(0, 2, size=design.count).astype(bool)


def coordinates(design: CanaryDesign) -> tuple[np.ndarray, np.ndarray]:
    """Coordinate canaries ``sign_j·e_{index_j}``: distinct indices and ±1 signs, shape ``(m,)``."""
    if design.kind != "coordinate":
        raise InputError("canaries.kind", design.kind, "coordinate (for coordinates())")
    rng = design.generator(_COORDINATE)
    index = rng.choice(design.dim, size=design.count, replace=False)
    sign = np.where(rng.integers(0, 2, size=design.count) == 1, 1.0, -1.0)
    return index, sign


def _random_block(design: CanaryDesign, block: int) -> np.ndarray:
    rows = min(BLOCK, design.count - block * BLOCK)
    draw = design.generator(_DIRECTION, block).standard_normal((rows, design.dim))
    return draw / np.linalg.norm(draw, ord=design.norm, axis=1, keepdims=True)


def direction_blocks(design: CanaryDesign) -> Iterator[tuple[int, np.ndarray]]:
    """``(start, d[start:start+b])`` for consecutive blocks of unit directions, ``b ≤ BLOCK``."""
    if design.kind == "coordinate":
        index, sign = coordinates(design)
        for start in range(0, design.count, BLOCK):
            stop = min(start + BLOCK, design.count)
            rows = np.zeros((stop - start, design.dim))
            rows[np.arange(stop - start), index[start:stop]] = sign[start:stop]
            yield start, rows
        return
    for block in range((design.count + BLOCK - 1) // BLOCK):
        yield block * BLOCK, _random_block(design, block)


def directions(design: CanaryDesign) -> np.ndarray:
    """All unit directions ``d_j`` as an ``(m, p)`` array (``m·p·8`` bytes: mind large ``m``)."""
    return np.concatenate([rows for _, rows in direction_blocks(design)])


def canary_sum(
    design: CanaryDesign, *, rate: float = 1.0, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``Σ_{j in} c_j``: what the client adds to its clipped sum in one local step, shape ``(p,)``.

    Parameters
    ----------
    rate
        1 (default): every in-canary joins every step. Below 1: each in-canary joins this step
        with probability ``rate``, drawn from ``rng`` — the client's *private* generator (the
        server must not know the pattern, or the canary is not subsampled for the audit).
    rng
        Required when ``rate < 1``.
    """
    q = check_rate("canaries.rate", rate)
    chosen = inclusion(design)
    if q < 1.0:
        if rng is None:
            raise InputError("canaries.rng", rng, "the client's private generator when rate < 1")
        chosen &= rng.random(design.count) < q
    total = np.zeros(design.dim)
    if design.kind == "coordinate":
        index, sign = coordinates(design)
        total[index[chosen]] = sign[chosen]
        return design.clip * total
    for start, rows in direction_blocks(design):
        total += rows[chosen[start : start + rows.shape[0]]].sum(axis=0)
    return design.clip * total


def augmented_batch_size(batch_size: float, count: int, rate: float = 1.0) -> float:
    """Expected size of a batch with canaries, ``L' = L + rate·m/2``.

    The expected number of in-canaries, not the realised one: a divisor built from it
    reveals nothing about the secret bits.
    """
    return (check_positive("batch_size", batch_size)
            + check_rate("canaries.rate", rate) * check_dim("canaries.count", count) / 2.0)


def canary_displacement(
    design: CanaryDesign, *, lr: float, steps: int, batch_size: float
) -> np.ndarray:
    """The canaries' direct share of a client's update ``Δ`` (every-step insertion, plain SGD).

    Each of ``steps`` local steps moves the parameters by ``−η·(S_t + Σ_{in} c_j + N_t)/L'``
    (``batch_size`` is the divisor ``L'`` the client used, ``lr`` its learning rate ``η``), so
    ``Δ`` contains ``−η·steps·Σ_{in} c_j / L'`` whatever the data. The server, which knows
    the design, subtracts it before aggregating — post-processing, so no privacy cost. With one
    local step this removes the canaries from the global model exactly; with more, steps
    ``2..k`` still evaluated their gradients at points displaced by the earlier canary steps
    (by at most ``η(t−1)‖Σ_{in} c_j‖/L'``), an effect of second order in ``η``.
    """
    eta = check_positive("lr", lr)
    k = check_dim("steps", steps)
    return -eta * k * canary_sum(design) / check_positive("batch_size", batch_size)
