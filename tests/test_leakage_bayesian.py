"""Bayesian privacy (privacy-math.md §6): MBP/ABP bounds against exact posteriors, estimators.

The bounds are checked against exact posteriors of small discrete and continuous mechanisms,
computed here from the definition; the JS divergence against scipy's ``jensenshannon``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from fedpriv.errors import InputError
from fedpriv.leakage.bayesian import (
    abp_bound,
    abp_estimate,
    cumulative_mbp_bound,
    laplace_mbp_bound,
    mbp_estimate,
    posterior_from_matches,
    vmf_mbp_bound,
)


def _log_ratio_and_abp(likelihoods: np.ndarray, prior: np.ndarray) -> tuple[float, float]:
    """max over outputs w and secrets d of |log(post(d|w)/prior(d))|, and max_w sqrt(JS)."""
    joint = likelihoods * prior[:, None]  # (secrets, outputs)
    post = joint / joint.sum(axis=0, keepdims=True)
    xi = float(np.max(np.abs(np.log(post / prior[:, None]))))
    abp = max(float(jensenshannon(post[:, w], prior)) for w in range(post.shape[1]))
    return xi, abp


def test_laplace_bound_is_two_r_over_b_and_r_over_b_is_not_enough() -> None:
    r, b = 1.0, 1.0
    w = np.linspace(-30, 30, 6001)  # outputs on a fine grid (the posterior is exact per output)
    secrets = np.array([-r, r])
    likelihoods = np.exp(-np.abs(w[None, :] - secrets[:, None]) / b)
    xi_uniform, _ = _log_ratio_and_abp(likelihoods, np.array([0.5, 0.5]))
    # two secrets ±r, uniform prior: |log ratio| = 2r/b − log 2 + log(1 + e^{−2r/b}) > r/b
    assert xi_uniform == pytest.approx(2 * r / b - math.log(2) + math.log1p(math.exp(-2 * r / b)))
    assert xi_uniform > r / b
    xi_skewed, _ = _log_ratio_and_abp(likelihoods, np.array([1e-6, 1 - 1e-6]))
    assert r / b < xi_skewed <= laplace_mbp_bound(r, b) == 2 * r / b
    assert xi_skewed == pytest.approx(2 * r / b, abs=1e-5)  # the bound is attained in the limit


def test_vmf_bound_two_kappa_on_the_circle() -> None:
    kappa = 1.5
    angles = np.linspace(0, 2 * np.pi, 3601)
    outputs = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    secrets = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    likelihoods = np.exp(kappa * secrets @ outputs.T)
    xi, _ = _log_ratio_and_abp(likelihoods, np.array([1e-6, 1 - 2e-6, 1e-6]))
    assert xi <= vmf_mbp_bound(kappa) == 2 * kappa
    assert xi == pytest.approx(2 * kappa, abs=1e-5)  # antipodal secrets attain it


def test_gaussian_has_no_finite_bound() -> None:
    # two secrets ±1, N(x, 1) noise: the log posterior ratio grows without limit in |w|
    w = np.array([5.0, 50.0, 500.0])
    log_lik = -((w[None, :] - np.array([[-1.0], [1.0]])) ** 2) / 2
    log_ratio = log_lik[0] - np.logaddexp(log_lik[0], log_lik[1]) + math.log(2)  # uniform prior
    assert np.allclose(log_ratio, -2 * w + math.log(2) - np.log1p(np.exp(-2 * w)))
    assert log_ratio[2] < -900


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    eps=st.floats(0.01, 3.0),
    k=st.integers(2, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_ldp_implies_mbp_and_abp_bound(eps: float, k: int, seed: int) -> None:
    # k-ary randomised response is eps-LDP; any prior, exact posteriors
    rng = np.random.default_rng(seed)
    stay = math.exp(eps) / (math.exp(eps) + k - 1)
    likelihoods = np.full((k, k), (1 - stay) / (k - 1))
    np.fill_diagonal(likelihoods, stay)
    prior = rng.dirichlet(np.ones(k))
    xi, abp = _log_ratio_and_abp(likelihoods, prior)
    assert xi <= eps + 1e-12
    assert abp <= abp_bound(xi) + 1e-12 and abp_bound(xi) <= abp_bound(eps)


def test_abp_bound_formula() -> None:
    assert abp_bound(0.0) == 0.0
    assert abp_bound(1.0) == pytest.approx(math.sqrt(1.0 * (math.e - 1) / 2))
    assert abp_bound(0.5, prior_mismatch=0.5) == abp_bound(1.0)
    assert abp_bound(math.inf) == math.inf
    assert abp_bound(800.0) == math.inf  # e^ξ overflows a double: vacuous, no OverflowError
    with pytest.raises(InputError):
        abp_bound(-1.0)


def test_cumulative_bound_adds() -> None:
    assert cumulative_mbp_bound([0.5, 0.25, 2.0]) == 2.75
    assert cumulative_mbp_bound([0.5, math.inf]) == math.inf
    assert cumulative_mbp_bound([]) == 0.0
    with pytest.raises(InputError):
        cumulative_mbp_bound([0.5, -1.0])


def test_uniform_matches_give_zero() -> None:
    posterior = posterior_from_matches([3, 3, 3, 3], 4, smoothing=1.0)
    assert np.allclose(posterior, 0.25)
    assert mbp_estimate(posterior, 4) == pytest.approx(0.0, abs=1e-15)
    assert abp_estimate(posterior) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize("pool", [2, 10, 1000])
def test_all_mass_on_one_candidate(pool: int) -> None:
    posterior = posterior_from_matches({3 % pool: 7}, pool, smoothing=0.0)
    assert mbp_estimate(posterior, pool) == pytest.approx(math.log(pool))
    assert abp_estimate(posterior) == pytest.approx(
        jensenshannon(posterior, np.full(pool, 1 / pool))
    )


def test_smoothing_formula() -> None:
    posterior = posterior_from_matches([5, 0, 1], 3, smoothing=1.0)
    assert np.allclose(posterior, np.array([6, 1, 2]) / 9)
    assert mbp_estimate(posterior, 3) == pytest.approx(abs(math.log(3 / 9)))  # log(1/9 · 3)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(counts=st.lists(st.integers(0, 50), min_size=2, max_size=30), smoothing=st.floats(0.0, 3.0))
def test_abp_estimate_matches_scipy(counts: list[int], smoothing: float) -> None:
    if sum(counts) == 0 and smoothing == 0.0:
        return
    posterior = posterior_from_matches(counts, len(counts), smoothing=smoothing)
    uniform = np.full(len(counts), 1 / len(counts))
    assert abp_estimate(posterior) == pytest.approx(jensenshannon(posterior, uniform), abs=1e-7)
    assert abp_estimate(posterior) <= math.sqrt(math.log(2)) + 1e-12


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda: posterior_from_matches([0, 0], 2, smoothing=0.0), "counts"),
        (lambda: posterior_from_matches([1, 2, 3], 2), "counts"),
        (lambda: posterior_from_matches({5: 1}, 2), "counts"),
        (lambda: posterior_from_matches([1, -1], 2), "counts"),
        (lambda: posterior_from_matches([1, 1], 0), "pool_size"),
        (lambda: posterior_from_matches([1, 1], 2, smoothing=-1.0), "smoothing"),
        (lambda: mbp_estimate([0.5, 0.5], 3), "pool_size"),
        (lambda: abp_estimate([0.5, 0.6]), "F_A"),
        (lambda: laplace_mbp_bound(1.0, 0.0), "scale"),
        (lambda: vmf_mbp_bound(-1.0), "kappa"),
    ],
)
def test_bad_inputs(call, key: str) -> None:  # noqa: ANN001
    with pytest.raises(InputError) as info:
        call()
    assert info.value.key == key
