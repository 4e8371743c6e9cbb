"""RDP → (ε, δ): the spec's formula against dp-accounting's ``compute_epsilon``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedpriv.accounting.conversion import DEFAULT_ORDERS, rdp_to_epsilon
from fedpriv.accounting.dp_library import gaussian_subsampled_rdp
from fedpriv.accounting.rdp import vmf_rdp


def test_default_orders_are_dp_accountings() -> None:
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    assert list(DEFAULT_ORDERS) == list(map(float, DEFAULT_RDP_ORDERS))


@pytest.mark.parametrize(
    "rdp",
    [
        1407 * gaussian_subsampled_rdp(DEFAULT_ORDERS, 1.23, 128 / 60000),
        50 * vmf_rdp(DEFAULT_ORDERS, 5.0, 40),
        vmf_rdp(DEFAULT_ORDERS, 100.0, 13_700),
    ],
)
@pytest.mark.parametrize("delta", [1e-8, 1 / 60000, 1e-3])
def test_matches_dp_accounting_compute_epsilon(rdp: np.ndarray, delta: float) -> None:
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    eps, order = compute_epsilon(DEFAULT_ORDERS, rdp, delta)
    mine = rdp_to_epsilon(DEFAULT_ORDERS, rdp, delta)
    assert mine.epsilon == pytest.approx(eps, rel=1e-12)
    assert mine.order == order


@settings(max_examples=40, deadline=None)
@given(slope=st.floats(1e-4, 10.0), offset=st.floats(0.0, 5.0), delta=st.floats(1e-10, 0.1))
def test_random_linear_curves_match_dp_accounting(slope: float, offset: float, delta: float):
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    rdp = offset + slope * np.array(DEFAULT_ORDERS)
    eps, _ = compute_epsilon(DEFAULT_ORDERS, rdp, delta)
    assert rdp_to_epsilon(DEFAULT_ORDERS, rdp, delta).epsilon == pytest.approx(eps, rel=1e-12)


def test_edge_of_grid_is_flagged() -> None:
    tiny = 1e-9 * np.array(DEFAULT_ORDERS)  # optimum wants orders beyond 1024
    huge = 1e4 * np.array(DEFAULT_ORDERS)  # optimum at the smallest order
    assert rdp_to_epsilon(DEFAULT_ORDERS, tiny, 1e-5).order == DEFAULT_ORDERS[-1]
    assert rdp_to_epsilon(DEFAULT_ORDERS, tiny, 1e-5).at_edge
    assert rdp_to_epsilon(DEFAULT_ORDERS, huge, 1e-5).order == DEFAULT_ORDERS[0]
    assert rdp_to_epsilon(DEFAULT_ORDERS, huge, 1e-5).at_edge
    mid = rdp_to_epsilon(DEFAULT_ORDERS, 0.01 * np.array(DEFAULT_ORDERS), 1e-5)
    assert not mid.at_edge


def test_infinite_curve_gives_infinite_epsilon() -> None:
    out = rdp_to_epsilon(DEFAULT_ORDERS, np.full(len(DEFAULT_ORDERS), np.inf), 1e-5)
    assert out.epsilon == np.inf and out.order is None
