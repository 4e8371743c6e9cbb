"""Per-property verdicts and the label they earn (fedpriv/verification/properties.py), and the
power figures behind them (fedpriv/verification/power.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from fedpriv.verification import Verdict, combine_verdicts, record_count, verify_gaussian
from fedpriv.verification.power import (
    gaussian_detectable_fraction,
    gaussian_norm_power,
    gaussian_signal_power,
)
from fedpriv.verification.properties import (
    COMMITTED_SETTLES,
    PROPERTIES,
    USEFUL_NOISE_FRACTION,
    label_of,
    label_reasons,
    property_verdicts,
    required_properties,
)
from fedpriv.verification.update import ClientUpdate
from fedpriv.verification.verdict import unverifiable

P = 13_700


def _update(rng: np.random.Generator, *, steps: int, per_step: int, sigma: float,
            actual: float | None = None) -> ClientUpdate:
    """A float64 update: ``per_step`` aligned clipped gradients per step plus noise."""
    actual = sigma if actual is None else actual
    direction = np.ones(P) / np.sqrt(P)
    u = steps * per_step * direction + actual * np.sqrt(steps) * rng.standard_normal(P)
    return ClientUpdate(summed=u / per_step, step_scale=0.1, weight_decay=0.0, steps=steps,
                        batch_size=float(per_step),
                        records=record_count(steps, batch_sizes=[per_step] * steps),
                        start_norms=(0.0, 0.0), delta_norms=(0.0, 0.0), unit_roundoff=0.0)


def _others_passed() -> list[Verdict]:
    """What the other helpers' checks would add: settings, size, identity, all passed."""
    return [Verdict(name, "consistent", f"{name} checked", p_value=1.0, speaks_to=(name,))
            for name in ("settings", "size-sampling", "identity")]


def test_detectable_fraction_is_where_the_power_crosses() -> None:
    f = gaussian_detectable_fraction(1.0, dim=P, records=4, steps=1, alpha=1e-6)
    assert 0.8 < f < 1.0
    assert gaussian_norm_power(1.0, f * 0.999, dim=P, records=4, alpha=1e-6) >= 0.99
    assert gaussian_norm_power(1.0, f * 1.01, dim=P, records=4, alpha=1e-6) < 0.99


def test_many_steps_see_only_one_steps_noise() -> None:
    """At 20 steps of 32 aligned records (the quickstart) no under-noising is guaranteed to be
    caught: the triangle's low threshold √k·σa − B is below the last step's σa, and an
    adversarial signal of norm B > σa makes up any norm. With 1 record per step the triangle
    catches f√k·χ + B ≤ √k·a − B (χ_p quantiles, closed form)."""
    assert gaussian_detectable_fraction(1.0, dim=P, records=640, steps=20) == 0.0
    f = gaussian_detectable_fraction(1.0, dim=P, records=20, steps=20)
    a, k = np.sqrt(stats.chi2.ppf(5e-7, P)), np.sqrt(20)
    assert f == pytest.approx((k * a - 40) / (k * np.sqrt(stats.chi2.ppf(0.99, P))), rel=1e-3)
    assert gaussian_detectable_fraction(1.0, dim=P, records=400, steps=20) < USEFUL_NOISE_FRACTION


def test_signal_power_closed_form_at_one_step() -> None:
    power = gaussian_signal_power(1.0, dim=P, records=32, steps=1, factor=10.0)
    assert power == pytest.approx(1.0)
    weak = gaussian_signal_power(1.0, dim=P, records=1, steps=1, factor=10.0)
    assert weak < 0.01  # a signal of 10 against noise of norm 117: invisible


def test_honest_one_step_round_is_verified_only_with_the_others() -> None:
    rng = np.random.default_rng(0)
    verdict = verify_gaussian(_update(rng, steps=1, per_step=4, sigma=1.0), noise_multiplier=1.0,
                              clip_bound=1.0)
    fresh = Verdict("fresh-noise", "consistent", "first", p_value=1.0, speaks_to=("fresh-noise",))
    props = property_verdicts(combine_verdicts([verdict, fresh]))
    assert set(props) == set(PROPERTIES)
    assert props["noise-scale"].status == "passed" and props["noise-scale"].useful
    assert "would catch noise below 0.9" in props["noise-scale"].power
    assert props["noise-law"].status == "passed"
    # settings, size and identity are not tested here: declared, with those reasons
    reasons = label_reasons(props)
    assert [r.split(":")[0] for r in reasons] == ["settings", "size-sampling", "identity",
                                                  "sensitivity"]
    full = property_verdicts(combine_verdicts([verdict, fresh, *_others_passed()]))
    # everything but per-record sensitivity (no replay without the oracle): noise-verified
    assert [r.split(":")[0] for r in label_reasons(full)] == ["sensitivity"]
    assert label_of("consistent", full) == "noise-verified"
    replayed = Verdict("sensitivity", "consistent", "residual is the noise", p_value=0.5,
                       alpha=1e-6, statistic={"detectable_epsilon_ratio": 1.1,
                                              "signal_epsilon_ratio": 30.0,
                                              "detectable_signal_factor": 5.0},
                       speaks_to=("sensitivity",))
    weak = property_verdicts(combine_verdicts([verdict, fresh, replayed, *_others_passed()]))
    # a signal scaled so that ε × 30 would pass: the replay's power is not useful
    assert label_of("consistent", weak) == "noise-verified"
    assert "power too low" in weak["sensitivity"].reason and "ε × 30" in weak["sensitivity"].reason
    strong = Verdict("sensitivity", "consistent", "residual is the noise", p_value=0.5,
                     alpha=1e-6, statistic={**replayed.statistic, "signal_epsilon_ratio": 1.8,
                                            "detectable_signal_factor": 1.2},
                     speaks_to=("sensitivity",))
    verified = property_verdicts(combine_verdicts([verdict, fresh, strong,
                                                   *_others_passed()]))
    assert label_reasons(verified) == [] and label_of("consistent", verified) == "verified"
    assert "ε 1.1 ×" in verified["sensitivity"].power
    assert verified["sensitivity"].to_dict()["epsilon_ratio"] == 1.1  # per client in report.json
    assert "epsilon_ratio" not in full["noise-scale"].to_dict()


def test_a_replay_of_too_little_power_or_a_failed_one_does_not_verify() -> None:
    weak = Verdict("sensitivity", "consistent", "fine", p_value=0.5, alpha=1e-6,
                   statistic={"detectable_epsilon_ratio": 3.0}, speaks_to=("sensitivity",))
    props = property_verdicts(combine_verdicts([weak, *_others_passed()]))
    assert props["sensitivity"].status == "not-tested" and "power too low" in \
        props["sensitivity"].reason
    exact = Verdict("committed-noise", "consistent", "within rounding", p_value=1.0,
                    statistic={"bound_in_noise": 0.001}, speaks_to=("sensitivity",))
    props = property_verdicts(combine_verdicts([weak, exact, *_others_passed()]))
    assert props["sensitivity"].status == "passed" and props["sensitivity"].useful
    assert "beyond 0.001 noise stds caught with probability 1" in props["sensitivity"].power
    refuted = dataclasses.replace(exact, status="inconsistent", reason="14 noise stds")
    props = property_verdicts(combine_verdicts([weak, refuted, *_others_passed()]))
    assert props["sensitivity"].status == "failed" and "14 noise stds" in \
        props["sensitivity"].reason
    bad = Verdict("sensitivity", "inconsistent", "signal x 10", p_value=1e-30, alpha=1e-6,
                  speaks_to=("sensitivity",))
    props = property_verdicts(combine_verdicts([bad, *_others_passed()]))
    assert props["sensitivity"].status == "failed"
    assert label_of("inconsistent", props) == "declared"
    fresh = Verdict("step-freshness", "inconsistent", "cancelled", p_value=1e-30, alpha=1e-6,
                    speaks_to=("fresh-noise",))
    assert property_verdicts(fresh)["fresh-noise"].status == "failed"


def test_twenty_steps_under_noised_is_declared_not_verified() -> None:
    """Issue 25: at 20 local steps noise × 0.3 passed every test and was `verified`."""
    rng = np.random.default_rng(1)
    update = _update(rng, steps=20, per_step=32, sigma=1.0, actual=0.3)
    verdict = verify_gaussian(update, noise_multiplier=1.0, clip_bound=1.0)
    assert verdict.status == "consistent"  # the tests cannot see it…
    props = property_verdicts(combine_verdicts([verdict, *_others_passed()]))
    assert props["noise-scale"].status == "not-tested"  # …and the label says so
    assert "power too low" in props["noise-scale"].reason
    assert any(r.startswith("noise-scale") for r in label_reasons(props))


def test_failures_map_to_their_property() -> None:
    rng = np.random.default_rng(2)
    low = verify_gaussian(_update(rng, steps=1, per_step=4, sigma=1.0, actual=0.5),
                          noise_multiplier=1.0, clip_bound=1.0)
    assert property_verdicts(low)["noise-scale"].status == "failed"
    replay = Verdict("replay", "inconsistent", "repeats round 1", p_value=0.0,
                     speaks_to=("fresh-noise",))
    assert property_verdicts(replay)["fresh-noise"].status == "failed"
    settings = Verdict("settings", "inconsistent", "lr differs", p_value=0.0,
                       speaks_to=("settings",))
    assert property_verdicts(settings)["settings"].status == "failed"


def test_vmf_kappa_is_not_tested() -> None:
    vmf = combine_verdicts([Verdict("vmf-norm", "consistent", "norm = s", p_value=1.0,
                                    speaks_to=("signal-bound",)),
                            unverifiable("vmf-kappa", "κ not observable",
                                         speaks_to=("noise-scale",))], test="vmf")
    props = property_verdicts(combine_verdicts([vmf, *_others_passed()]))
    assert props["noise-scale"].status == "not-tested"
    assert "κ" in props["noise-scale"].reason
    assert props["noise-law"].status == "not-tested"
    assert label_reasons(props)


def test_client_level_does_not_need_size_sampling() -> None:
    assert "size-sampling" not in required_properties("client")
    assert "size-sampling" in required_properties("record")


def test_a_canary_violation_fails_noise_scale_and_a_pass_does_not_verify_it() -> None:
    bad = Verdict("canaries", "inconsistent", "ε lower bound above the formal ε", p_value=1e-9,
                  speaks_to=("noise-scale",), refutes_only=True)
    assert property_verdicts(bad)["noise-scale"].status == "failed"
    good = Verdict("canaries", "consistent", "below", p_value=0.5, refutes_only=True)
    assert property_verdicts(good)["noise-scale"].status == "not-tested"


def test_committed_noise_settles_what_its_own_tests_could_not() -> None:
    """A release that is the server's clipped sum plus the declared draw of this round's stream
    has the declared noise, fresh, and a signal within its bound: a Laplace round, whose
    freshness has no test and whose signal bound little power, is verified by it — and only
    by it."""
    weak_bound = Verdict("laplace-norm", "consistent", "fits", p_value=0.5, alpha=1e-6,
                         speaks_to=("signal-bound",))
    replayed = Verdict("sensitivity", "consistent", "residual is the noise", p_value=0.5,
                       alpha=1e-6, statistic={"detectable_epsilon_ratio": 1.1,
                                              "signal_epsilon_ratio": 40.0},
                       speaks_to=("sensitivity",))
    others = _others_passed()
    plain = property_verdicts(combine_verdicts([weak_bound, replayed, *others]))
    assert plain["fresh-noise"].status == "not-tested"
    assert label_of("consistent", plain) == "declared"
    exact = Verdict("committed-noise", "consistent", "within rounding", p_value=1.0,
                    statistic={"bound_in_noise": 0.001}, speaks_to=("sensitivity",))
    settled = property_verdicts(combine_verdicts([weak_bound, replayed, exact, *others]))
    for name in COMMITTED_SETTLES:
        assert settled[name].status == "passed" and settled[name].useful, settled[name]
    assert "committed noise" in settled["fresh-noise"].reason
    assert label_of("consistent", settled) == "verified"
    refuted = dataclasses.replace(exact, status="inconsistent", reason="14 noise stds")
    props = property_verdicts(combine_verdicts([weak_bound, replayed, refuted, *others]))
    assert props["fresh-noise"].status == "not-tested"  # a refuted draw settles nothing
