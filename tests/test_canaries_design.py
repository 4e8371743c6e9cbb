"""Canary design: shared-seed determinism, fair inclusion, unit canaries, the canary sum.

Statistical checks use fixed seeds; each states the probability that a correct implementation
fails it.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedpriv.canaries import (
    CanaryDesign,
    augmented_batch_size,
    canary_displacement,
    canary_sum,
    directions,
    inclusion,
)
from fedpriv.canaries.design import BLOCK, coordinates
from fedpriv.errors import InputError


@pytest.mark.parametrize(
    "change",
    [{"seed": -1}, {"seed": 1.5}, {"count": 0}, {"dim": 1}, {"clip": 0.0}, {"clip": np.inf},
     {"kind": "gaussian"}, {"norm": 3}, {"norm": True}, {"count": 11, "kind": "coordinate"}],
)
def test_bad_designs_are_refused(change: dict) -> None:
    args = {"seed": 1, "count": 4, "dim": 10, "clip": 1.0} | change
    with pytest.raises(InputError):
        CanaryDesign(**args)


@pytest.mark.parametrize("kind", ["coordinate", "random"])
def test_the_seed_determines_everything(kind: str) -> None:
    """Server and client derive the same canaries and bits; another seed gives others."""
    a, b = (CanaryDesign(7, 300, 500, 2.0, kind) for _ in range(2))
    other = CanaryDesign(8, 300, 500, 2.0, kind)
    np.testing.assert_array_equal(directions(a), directions(b))
    np.testing.assert_array_equal(inclusion(a), inclusion(b))
    assert not np.array_equal(directions(a), directions(other))
    assert not np.array_equal(inclusion(a), inclusion(other))


def test_inclusion_is_a_fair_independent_coin() -> None:
    """Bits ~ Bernoulli(½) iid: the count and the number of equal neighbours are Binomial(·, ½).

    Each check allows 5.3 standard deviations: a correct implementation fails with probability
    below 2e-7 per check.
    """
    bits = inclusion(CanaryDesign(3, 20_000, 20_000, 1.0))
    n = bits.size
    assert abs(bits.sum() - n / 2) < 5.3 * np.sqrt(n / 4)
    same = np.sum(bits[1:] == bits[:-1])
    assert abs(same - (n - 1) / 2) < 5.3 * np.sqrt((n - 1) / 4)


@pytest.mark.parametrize(("kind", "norm"), [("coordinate", 2), ("random", 2), ("random", 1)])
def test_canaries_have_unit_norm_in_the_clipping_norm(kind: str, norm: int) -> None:
    d = directions(CanaryDesign(5, 600, 1_000, 1.0, kind, norm))
    assert d.shape == (600, 1_000)
    np.testing.assert_allclose(np.linalg.norm(d, ord=norm, axis=1), 1.0, rtol=1e-12)


def test_coordinate_canaries_are_orthonormal_signed_axes() -> None:
    design = CanaryDesign(5, 700, 1_000, 1.0)
    index, sign = coordinates(design)
    assert np.unique(index).size == 700 and set(np.unique(sign)) == {-1.0, 1.0}
    d = directions(design)
    np.testing.assert_array_equal(d @ d.T, np.eye(700))


def test_random_directions_are_isotropic() -> None:
    """For independent uniform directions ``E⟨d_i, d_j⟩² = 1/p`` and ``E d = 0``.

    300 directions give 44,850 pairs whose squared products have relative standard deviation
    ≈ √(2/44,850) ≈ 0.7% of the mean: the ±10% band is ~15 standard deviations wide. The mean
    direction has norm² ≈ 1/300 (each coordinate of the mean ~ N(0, 1/(300p))); 3/300 bounds
    it with failure probability below 1e-100 (a χ²_p tail).
    """
    d = directions(CanaryDesign(11, 300, 1_000, 1.0, "random"))
    gram = d @ d.T
    off = gram[np.triu_indices(300, k=1)]
    assert 0.9 < 1_000 * np.mean(off**2) < 1.1
    assert np.sum(d.mean(axis=0) ** 2) < 3.0 / 300


def test_random_canaries_do_not_depend_on_how_many_there_are() -> None:
    """Blocks have their own generators, so canary j is the same for any m > j."""
    small = directions(CanaryDesign(4, BLOCK + 10, 800, 1.0, "random"))
    large = directions(CanaryDesign(4, 3 * BLOCK, 800, 1.0, "random"))
    np.testing.assert_array_equal(small, large[: BLOCK + 10])


@pytest.mark.parametrize(("kind", "norm"), [("coordinate", 2), ("random", 2), ("random", 1)])
def test_canary_sum_is_the_sum_of_the_included_canaries(kind: str, norm: int) -> None:
    design = CanaryDesign(9, 2 * BLOCK + 3, 900, 0.7, kind, norm)
    expected = 0.7 * directions(design)[inclusion(design)].sum(axis=0)
    np.testing.assert_allclose(canary_sum(design), expected, rtol=1e-12, atol=1e-12)


def test_poisson_insertion_subsamples_the_included_canaries() -> None:
    """With ``rate`` q each in-canary joins a step with probability q, out-canaries never.

    Over 400 steps each of ~100 in-canaries joins Binomial(400, 0.3) times (mean 120, sd 9.2);
    the pooled count over all of them is Binomial(400·n_in, 0.3): 5.3 standard deviations give
    a false-failure probability below 2e-7.
    """
    design = CanaryDesign(2, 200, 300, 1.0)
    index, sign = coordinates(design)
    rng = np.random.default_rng(0)
    joined = np.zeros(200)
    for _ in range(400):
        joined += canary_sum(design, rate=0.3, rng=rng)[index] * sign
    bits = inclusion(design)
    assert np.all(joined[~bits] == 0.0)
    trials = 400 * bits.sum()
    assert abs(joined[bits].sum() - 0.3 * trials) < 5.3 * np.sqrt(trials * 0.3 * 0.7)
    with pytest.raises(InputError, match="rng"):
        canary_sum(design, rate=0.3)


def test_augmented_batch_size_adds_the_expected_number_of_in_canaries() -> None:
    assert augmented_batch_size(64, 1_000) == 64 + 500
    assert augmented_batch_size(64, 1_000, rate=0.1) == 64 + 50
    with pytest.raises(InputError):
        augmented_batch_size(64, 0)


def test_server_removes_the_canaries_from_a_one_step_update() -> None:
    """Plain SGD, one step: Δ minus the displacement is the update without canaries, exactly."""
    design = CanaryDesign(1, 50, 200, 1.0)
    rng = np.random.default_rng(0)
    theta, data_sum, noise = (rng.standard_normal(200) for _ in range(3))
    lr, batch = 0.1, augmented_batch_size(10, 50)
    with_canaries = -lr * (data_sum + canary_sum(design) + noise) / batch
    without = -lr * (data_sum + noise) / batch
    removed = with_canaries - canary_displacement(design, lr=lr, steps=1, batch_size=batch)
    np.testing.assert_allclose(removed, without, atol=1e-14)
    assert theta.shape == removed.shape


def test_multi_step_residual_is_second_order_in_the_learning_rate() -> None:
    """k steps on a model whose gradient depends on θ (g = Aθ, ‖A‖ ≤ 1): after removal the
    residual is bounded by ``η²‖A‖‖c‖/L' · k(k−1)/2`` — the docstring's claim."""
    design = CanaryDesign(1, 50, 200, 1.0)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((200, 200))
    a /= np.linalg.norm(a, 2)
    c, batch, k = canary_sum(design), augmented_batch_size(10, 50), 5
    for lr in (0.1, 0.01):
        theta, plain = np.ones(200), np.ones(200)
        for _ in range(k):
            theta = theta - lr * (a @ theta + c) / batch
            plain = plain - lr * (a @ plain) / batch
        delta = theta - 1.0 - canary_displacement(design, lr=lr, steps=k, batch_size=batch)
        residual = np.linalg.norm(delta - (plain - 1.0))
        assert residual <= lr**2 * np.linalg.norm(c) / batch**2 * k * (k - 1) / 2 * 1.01


def test_public_api_is_sorted_and_resolves() -> None:
    import importlib
    import pkgutil

    import fedpriv.canaries as canaries

    # isort-style (ruff RUF022): CONSTANTS, then the rest, each alphabetical
    assert canaries.__all__ == sorted(canaries.__all__, key=lambda n: (not n.isupper(), n))
    assert all(hasattr(canaries, name) for name in canaries.__all__)
    for info in pkgutil.iter_modules(canaries.__path__):
        module = importlib.import_module(f"fedpriv.canaries.{info.name}")
        assert module.__all__ == sorted(module.__all__, key=lambda n: (not n.isupper(), n))
        assert all(hasattr(module, name) for name in module.__all__), info.name
