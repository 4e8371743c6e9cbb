"""Choosing the PLD grid before allocating (pld_grid) and the Gaussian/Laplace PLD factories.

Independent checks: dp-accounting's own window rule (``compute_self_convolve_bounds``) and its
``PLDAccountant``; the exact composed Gaussian (Balle & Wang's closed form); floor-rounded
buckets for the subsampled Laplace (``pld_support``, a rigorous lower bound).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from pld_support import epsilon_lower_bound, gaussian_composed_epsilon, laplace_directions

from fedpriv.accounting import dp_library, pld_grid
from fedpriv.accounting.pld_grid import (
    FINE_RESOLUTION,
    GridNeed,
    LossLaw,
    choose_discretization,
    composed_width,
    resolve_discretization,
)
from fedpriv.errors import InputError


def _step_of(pld: object) -> float:
    return pld._pmf_remove._discretization  # type: ignore[attr-defined]


@pytest.mark.parametrize("steps", [1, 7, 1407, 10**6])
def test_composed_width_is_dp_accountings_window(steps: int) -> None:
    """On a PMF list, ``composed_width`` reproduces ``compute_self_convolve_bounds`` (whose
    orders are k/n per grid point for n points, k/W per nat here: equal up to 1/n)."""
    from dp_accounting.pld import common

    rng = np.random.default_rng(7)
    n, step = 20_000, 1e-3
    probs = rng.gamma(0.3, size=n) * np.exp(-np.linspace(0, 30, n))
    probs /= probs.sum()
    lo, hi = common.compute_self_convolve_bounds(probs, steps, 1e-15)
    law = LossLaw(np.arange(n) * step - 3.0, probs, -3.0, (n - 1) * step - 3.0)
    assert composed_width(law, steps) == pytest.approx((hi - lo) * step, rel=2e-3, abs=2 * step)


def test_gaussian_loss_std_is_one_over_sigma() -> None:
    """Unsubsampled Gaussian: the loss (x − ½)/σ² under N(1, σ²) has standard deviation 1/σ."""
    for sigma in (0.3, 1.0, 5.0):
        assert dp_library.gaussian_grid_need(sigma, 1.0).loss_std == pytest.approx(1 / sigma,
                                                                                  rel=1e-3)


def test_default_grid_where_it_fits_equals_dp_accounting() -> None:
    from dp_accounting import dp_event, pld

    for factory, event in ((dp_library.laplace_pld, dp_event.LaplaceDpEvent(2.0)),
                           (dp_library.gaussian_pld, dp_event.GaussianDpEvent(1.23))):
        parameter = 2.0 if factory is dp_library.laplace_pld else 1.23
        acc = pld.PLDAccountant()
        acc.compose(dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(0.01, event), 500))
        mine = factory(parameter, 0.01, steps=500)
        assert _step_of(mine) == dp_library.DEFAULT_DISCRETIZATION
        ours = mine.self_compose(500).get_epsilon_for_delta(1e-5)
        assert ours == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)


def test_gaussian_coarse_grid_against_the_closed_form() -> None:
    """σ = 1, T = 10⁵ unsubsampled: Δ = 1e-4 would need 5.4 M composed points; the chosen grid
    gives ε ≥ the exact value (μ = √T/σ) and within 2 % of it."""
    sigma, steps, delta = 1.0, 100_000, 1e-5
    pld = dp_library.gaussian_pld(sigma, 1.0, steps=steps)
    assert _step_of(pld) > 10 * dp_library.DEFAULT_DISCRETIZATION
    got = pld.self_compose(steps).get_epsilon_for_delta(delta)
    exact = gaussian_composed_epsilon(sigma, steps, delta)
    assert exact <= got <= 1.02 * exact


def test_laplace_coarse_grid_against_an_exact_lower_bound(monkeypatch) -> None:
    """λ = 0.01, q = 0.05, T = 200: ε ≈ 2,400 needs Δ ≈ 1.5e-3 at the real budget, 1.5e-2 at
    the 300,000 points set here; the answer is within 2 % of the floor-bucket lower bound
    (T·h/2 = 2 below the truth at most) and above it."""
    monkeypatch.setattr(pld_grid, "POINT_BUDGET", 300_000)
    scale, q, steps, delta = 0.01, 0.05, 200, 1e-5
    pld = dp_library.laplace_pld(scale, q, steps=steps)
    assert _step_of(pld) > 10 * dp_library.DEFAULT_DISCRETIZATION
    got = pld.self_compose(steps).get_epsilon_for_delta(delta)
    low = epsilon_lower_bound(laplace_directions(scale, q), steps, delta, h=0.02)
    assert low <= got <= 1.02 * low


@pytest.mark.parametrize(
    ("factory", "parameter", "q", "steps"),
    [(dp_library.gaussian_pld, 1.0, 0.01, 10**6), (dp_library.gaussian_pld, 0.05, 0.01, 100),
     (dp_library.laplace_pld, 0.01, 0.05, 200), (dp_library.laplace_pld, 0.1, 1.0, 5)],
)
def test_predicted_sizes_are_what_dp_accounting_allocates(
    monkeypatch, factory, parameter, q, steps
) -> None:
    """Single-release grid exact to a point; composed window within 1 % and within the budget
    (300,000 points here: it binds in every case). Remove direction: the add direction of
    dp-accounting's subsampled Gaussian ran 25 % wider than predicted at Δ = 1e-4, from
    rounding noise it clips, in settings where the budget does not bind."""
    monkeypatch.setattr(pld_grid, "POINT_BUDGET", 300_000)
    need = (dp_library.gaussian_grid_need if factory is dp_library.gaussian_pld
            else dp_library.laplace_grid_need)(parameter, q, steps)
    step = choose_discretization([need], dp_library.DEFAULT_DISCRETIZATION)
    pld = factory(parameter, q, steps=steps)
    assert pld._pmf_remove.size == pytest.approx(need.laws[0].width / step, abs=3)
    composed = pld.self_compose(steps)
    predicted = composed_width(need.laws[0], steps) / step
    assert composed._pmf_remove.size == pytest.approx(predicted, rel=1e-2)
    assert composed._pmf_remove.size <= 300_000


@pytest.mark.parametrize(
    ("call", "key"),
    [(lambda: dp_library.gaussian_pld(1e300, 0.0021333, steps=1407), "noise_multiplier"),
     (lambda: dp_library.gaussian_pld(1e-5, 0.0021333), "noise_multiplier"),
     (lambda: dp_library.gaussian_pld(1.0, 0.0021333, steps=1e12), "steps"),
     (lambda: dp_library.gaussian_pld(1.0, 0.01, steps=1e12), "steps"),
     (lambda: dp_library.laplace_pld(1e-300, 0.01), "laplace_scale"),
     (lambda: dp_library.laplace_pld(1.0, 0.01, steps=1e12), "steps"),
     (lambda: dp_library.laplace_pld(1.0, 1.5), "sample_rate"),
     (lambda: dp_library.gaussian_pld(1.0, 0.01, 1e-9, steps=1000), "discretization")],
)
def test_refusals_name_the_parameter_before_allocating(call, key: str) -> None:
    """σ = 1e300 overflowed, T = 1e12 asked for 142 GiB–2.2 TiB; now a named refusal that
    allocates only the coarse law."""
    tracemalloc.start()
    with pytest.raises(InputError) as info:
        call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert info.value.key == key
    assert peak < 64 * 2**20


def _two_point(steps: int) -> GridNeed:
    """One release whose loss is 0 or 2 with probability ½ each (W = 2, s = 1)."""
    law = LossLaw(np.array([0.0, 2.0]), np.array([0.5, 0.5]), 0.0, 2.0)
    return GridNeed((law,), steps, "kappa", 1.0)


def test_ledger_grid_sums_the_composed_windows_and_checks_accuracy() -> None:
    a, b = _two_point(100), _two_point(300)
    assert a.loss_std == pytest.approx(1.0)
    usable = 10**4 * (1 - 5e-2)
    assert choose_discretization([a], 1e-5, budget=10**4) == a.composed_width / usable
    both = choose_discretization([a, b], 1e-5, budget=10**4)
    assert both == pytest.approx((a.composed_width + b.composed_width) / usable)
    # where the budget allows, a hundredth of the loss spread (finer buys no digit)
    assert choose_discretization([a], 1e-5, budget=10**7) == a.loss_std / FINE_RESOLUTION
    assert choose_discretization([_two_point(1)], 0.01, budget=1000) == 0.01
    with pytest.raises(InputError) as info:  # would need Δ ≈ 0.6 > s/RESOLUTION = 0.1
        choose_discretization([a, b], 1e-5, budget=1000)
    assert info.value.key == "steps"
    with pytest.raises(InputError) as info:  # one release alone needs Δ = 2/9.9 > 0.1
        choose_discretization([_two_point(1)], 1e-5, budget=10)
    assert info.value.key == "kappa"


def test_explicit_discretization_is_kept_when_it_fits() -> None:
    need = _two_point(100)
    finest = need.composed_width / (10**5 * (1 - 5e-2))
    assert resolve_discretization(need, 1.01 * finest, 1e-5, budget=10**5) == 1.01 * finest
    with pytest.raises(InputError) as info:
        resolve_discretization(need, 0.9 * finest, 1e-5, budget=10**5)
    assert info.value.key == "discretization"
    automatic = max(finest, need.loss_std / FINE_RESOLUTION)
    assert resolve_discretization(need, None, 1e-5, budget=10**5) == pytest.approx(automatic)
