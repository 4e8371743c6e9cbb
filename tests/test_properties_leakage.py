"""Properties of Bayes capacity and trade-off functions over random parameters (§4, §5).

Capacity (C = ∫ sup_x f(y|x) dy, reported as log C):

* 0 ≤ log C < ∞ in the valid domain, up to p = 10⁷;
* Gaussian and Laplace capacities depend on the secret radius and the noise scale only
  through their ratio (rescale y);
* log C grows with the radius, shrinks with the noise scale, and never shrinks with the
  dimension (restricting the secrets of the p-dimensional channel to a (p−1)-dimensional
  ball gives the (p−1)-dimensional channel plus an independent noise coordinate, and fewer
  secrets cannot raise capacity); VMF's grows with κ;
* an ε-LDP (hence ε-MBP) mechanism has sup_x f(y|x) ≤ e^ε f(y), so log C ≤ ε: Laplace
  log C ≤ r/b and VMF log C ≤ 2κ, checked through the mechanisms' own interface.

Trade-off functions f of Gaussian and Laplace mechanisms at random μ: values in [0, 1],
f(α) ≤ 1 − α, non-increasing, convex, f(1) = 0, symmetric (f∘f = id), and a larger μ gives a
pointwise smaller f. (The VMF curve at random κ, p is covered in test_leakage_tradeoff.py.)
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fedpriv.leakage.capacity import (
    log_capacity_gaussian,
    log_capacity_laplace,
    log_capacity_vmf,
)
from fedpriv.leakage.tradeoff import gaussian_tradeoff, laplace_tradeoff
from fedpriv.mechanisms import build_mechanism

CHECKED = settings(max_examples=60, deadline=None, derandomize=True)
dims = st.integers(1, 10**7)
small_dims = st.integers(1, 5000)
radii = st.floats(1e-4, 1e3)
scales = st.floats(1e-3, 1e3)
kappas = st.floats(1e-3, 1e5)
ADDITIVE = {"gaussian": log_capacity_gaussian, "laplace": log_capacity_laplace}
TOL = 1e-9


def _close_or_above(a: float, b: float) -> bool:
    """a ≥ b up to rounding of two large log-sums."""
    return a >= b - TOL * max(1.0, abs(b))


@CHECKED
@given(st.sampled_from(sorted(ADDITIVE)), dims, radii, scales)
def test_capacity_finite_and_at_least_one(kind: str, dim: int, r: float, s: float) -> None:
    value = ADDITIVE[kind](dim, r, s)
    assert math.isfinite(value) and value >= 0.0


@CHECKED
@given(st.integers(2, 10**7), kappas)
def test_vmf_capacity_finite_and_at_least_one(dim: int, kappa: float) -> None:
    value = log_capacity_vmf(dim, kappa)
    assert math.isfinite(value) and value >= 0.0


@CHECKED
@given(st.sampled_from(sorted(ADDITIVE)), small_dims, radii, scales, st.floats(1e-3, 1e3))
def test_capacity_depends_on_radius_over_scale_only(kind, dim, r, s, c) -> None:  # noqa: ANN001
    a, b = ADDITIVE[kind](dim, r, s), ADDITIVE[kind](dim, c * r, c * s)
    assert abs(a - b) <= 1e-9 * max(1.0, abs(a))


@CHECKED
@given(st.sampled_from(sorted(ADDITIVE)), small_dims, radii, radii, scales, scales)
def test_capacity_monotone_in_radius_and_scale(kind, dim, r1, r2, s1, s2) -> None:  # noqa: ANN001
    (r_lo, r_hi), (s_lo, s_hi) = sorted((r1, r2)), sorted((s1, s2))
    log_c = ADDITIVE[kind]
    assert _close_or_above(log_c(dim, r_hi, s_lo), log_c(dim, r_lo, s_lo))
    assert _close_or_above(log_c(dim, r_lo, s_lo), log_c(dim, r_lo, s_hi))


@CHECKED
@given(st.sampled_from(sorted(ADDITIVE)), small_dims, radii, scales)
def test_capacity_never_shrinks_with_dimension(kind, dim, r, s) -> None:  # noqa: ANN001
    log_c = ADDITIVE[kind]
    assert _close_or_above(log_c(dim + 1, r, s), log_c(dim, r, s))


@CHECKED
@given(st.integers(2, 10**6), kappas, kappas)
def test_vmf_capacity_grows_with_kappa(dim: int, k1: float, k2: float) -> None:
    low, high = sorted((k1, k2))
    assert _close_or_above(log_capacity_vmf(dim, high), log_capacity_vmf(dim, low))


@CHECKED
@given(st.integers(2, 10**6), radii, st.floats(0.01, 100.0), st.floats(0.01, 1e4))
def test_capacity_below_the_pure_ldp_bound(dim: int, radius: float, lam: float, kappa: float):
    """log C ≤ ξ for secrets within ``radius`` sensitivities (Sibson's I_∞ is at most the max
    log-density ratio)."""
    for name, params in (("laplace", {"laplace_scale": lam}), ("vmf", {"kappa": kappa})):
        release = build_mechanism(name, params).release(dim)
        bound = release.pure_ldp_epsilon(radius)
        assert release.log_bayes_capacity(dim, radius) <= bound * (1 + 1e-12) + 1e-12, name


ALPHA = np.linspace(0.0, 1.0, 4001)
TRADEOFFS = {"gaussian": gaussian_tradeoff, "laplace": laplace_tradeoff}


@CHECKED
@given(st.sampled_from(sorted(TRADEOFFS)), st.floats(1e-3, 30.0))
def test_closed_form_tradeoffs_are_tradeoff_functions(kind: str, mu: float) -> None:
    f = TRADEOFFS[kind](ALPHA, mu)
    assert np.all(np.isfinite(f)) and np.all((f >= 0) & (f <= 1))
    assert np.all(f <= 1 - ALPHA + 1e-12) and f[-1] == 0.0
    assert np.all(np.diff(f) <= 1e-13)
    assert np.all(np.diff(f, 2) >= -1e-9)  # convex
    inner = ALPHA[(ALPHA > 1e-3) & (ALPHA < 1 - 1e-3)]
    back = TRADEOFFS[kind](TRADEOFFS[kind](inner, mu), mu)
    kept = TRADEOFFS[kind](inner, mu) > 1e-12  # where f underflows, f∘f cannot recover α
    assert np.max(np.abs(back - inner)[kept], initial=0.0) < 1e-7


@CHECKED
@given(st.sampled_from(sorted(TRADEOFFS)), st.floats(1e-3, 30.0), st.floats(1e-3, 30.0))
def test_larger_mu_is_less_private(kind: str, m1: float, m2: float) -> None:
    low, high = sorted((m1, m2))
    f = TRADEOFFS[kind]
    assert np.all(f(ALPHA, high) <= f(ALPHA, low) + 1e-12)
