"""Properties of cumulative ε over random settings (privacy-math.md §3).

Every claim is a theorem about any correct accountant, checked on the whole pipeline
(:func:`fedpriv.accounting.epsilon`, RDP with the ``best`` route, i.e. the minimum of the
Zhu–Wang RDP route and Biswas et al.'s approach 1):

* more releases, a higher sampling rate, or less noise (smaller σ or λ, larger κ ≥ 1 —
  Biswas et al., Thm 1) never lower ε; a larger δ never raises it;
* inside the valid domain ε is a finite, non-negative number.

Extra releases at the same rate compose (they can only add privacy loss); the RDP curves and
the subsampling bound are monotone in the rate and the noise parameter. The comparisons
allow a relative slack of 1e-6 for the order-grid and root-finding tolerances of the routes.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fedpriv.accounting import ReleaseEvent, epsilon
from fedpriv.mechanisms import make_release

SLACK = 1e-6
PARAMETER = {
    "gaussian": st.floats(0.3, 20.0),
    "laplace": st.floats(0.3, 20.0),
    "vmf": st.floats(1.0, 2000.0),
}
mechanisms = st.sampled_from(sorted(PARAMETER))
rates = st.floats(1e-4, 1.0)
steps = st.integers(1, 3000)
deltas = st.floats(1e-10, 1e-2)
dims = st.integers(2, 20_000)
CHECKED = settings(max_examples=40, deadline=None, derandomize=True)


def _eps(mechanism: str, parameter: float, q: float, count: int, delta: float, dim: int) -> float:
    release = make_release(mechanism, parameter, dim)
    return epsilon([ReleaseEvent(release, q, count)], delta).epsilon


def _no_more(a: float, b: float) -> bool:
    return a <= b * (1 + SLACK) + 1e-12


@CHECKED
@given(st.data(), mechanisms, rates, steps, steps, deltas, dims)
def test_more_releases_never_lower_epsilon(data, mech, q, t1, t2, delta, dim) -> None:  # noqa: ANN001
    p = data.draw(PARAMETER[mech])
    low, high = sorted((t1, t2))
    e_low, e_high = _eps(mech, p, q, low, delta, dim), _eps(mech, p, q, high, delta, dim)
    assert 0.0 <= e_low and math.isfinite(e_high)
    assert _no_more(e_low, e_high)


@CHECKED
@given(st.data(), mechanisms, rates, rates, steps, deltas, dims)
def test_higher_sampling_rate_never_lowers_epsilon(data, mech, q1, q2, t, delta, dim) -> None:  # noqa: ANN001
    p = data.draw(PARAMETER[mech])
    low, high = sorted((q1, q2))
    assert _no_more(_eps(mech, p, low, t, delta, dim), _eps(mech, p, high, t, delta, dim))


@CHECKED
@given(st.data(), mechanisms, rates, steps, deltas, dims)
def test_less_noise_never_lowers_epsilon(data, mech, q, t, delta, dim) -> None:  # noqa: ANN001
    a, b = data.draw(PARAMETER[mech]), data.draw(PARAMETER[mech])
    low, high = sorted((a, b))
    e_low, e_high = _eps(mech, low, q, t, delta, dim), _eps(mech, high, q, t, delta, dim)
    if mech == "vmf":  # κ is a concentration: larger κ, less noise
        e_low, e_high = e_high, e_low
    assert _no_more(e_high, e_low)


@CHECKED
@given(st.data(), mechanisms, rates, steps, deltas, deltas, dims)
def test_larger_delta_never_raises_epsilon(data, mech, q, t, d1, d2, dim) -> None:  # noqa: ANN001
    p = data.draw(PARAMETER[mech])
    small, large = sorted((d1, d2))
    assert _no_more(_eps(mech, p, q, t, large, dim), _eps(mech, p, q, t, small, dim))
