"""``epsilon_observed`` (fedpriv/verification/observed.py): the noise bounds cover the true
noise at their stated confidence against the worst signal clipping allows (Monte Carlo), ε at
the bound is dp-accounting's own number, and through the ledger an under-noising client's
observed ε is far above its declared one while an honest client's stays near it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pld_support import assert_pessimistic_close
from scipy import optimize, stats

from fedpriv.accounting import ReleaseEvent
from fedpriv.accounting.at_noise import epsilon_at_noise, noise_grid
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import build_mechanism
from fedpriv.mechanisms.gaussian import GaussianRelease
from fedpriv.verification import client_update, record_count
from fedpriv.verification.observed import (
    NoiseObservation,
    ObservedNoise,
    gaussian_noise_lcb,
    gaussian_noise_lcbs,
    laplace_noise_lcb,
    lower_bounds,
    round_bounds,
    round_level,
    round_observation,
)

BETA = 0.1


def _covers(bounds: np.ndarray, truth: float, beta: float, *, tight: bool) -> None:
    """The bound exceeds the truth with probability ≤ β (within 4 standard errors); where the
    signal is the worst case and the law exact, with probability ≈ β (the test can fail)."""
    rate, se = float(np.mean(bounds > truth)), math.sqrt(beta * (1 - beta) / bounds.size)
    assert rate <= beta + 4 * se
    if tight:
        assert rate >= beta - 4 * se


def test_gaussian_multi_step_bound_covers_against_noise_aligned_signal():
    # k > 1: the signal may follow earlier steps' noise; the worst case points along it, so
    # ‖u‖ = ‖N‖ + C·B exactly and the triangle bound is exact.
    rng = np.random.default_rng(1)
    p, k, sigma, b = 40, 3, 0.7, 5.0
    norms = sigma * math.sqrt(k) * np.linalg.norm(rng.standard_normal((4000, p)), axis=1)
    bounds = np.array([gaussian_noise_lcb(x + b, dim=p, steps=k, signal=b, beta=BETA)
                       for x in norms])
    _covers(bounds, sigma, BETA, tight=True)


def test_gaussian_single_step_bound_covers_at_the_largest_independent_signal():
    # k = 1: the clipped sum is fixed before the noise; ‖S‖ = C·B is the worst case and the
    # non-central χ² law is exact there.
    rng = np.random.default_rng(2)
    p, sigma, b = 20, 0.8, 3.0
    signal = np.zeros(p)
    signal[0] = b
    norms = np.linalg.norm(signal + sigma * rng.standard_normal((500, p)), axis=1)
    bounds = np.array([gaussian_noise_lcb(x, dim=p, steps=1, signal=b, beta=BETA)
                       for x in norms])
    _covers(bounds, sigma, BETA, tight=True)


def test_single_step_set_is_an_interval_so_a_root_finder_finds_its_end():
    # σ ↦ P(χ'²_p(b²/σ²) ≥ x²/σ²) is nondecreasing (checked on a grid, scipy's ncx2)
    for p, x, b in ((5, 4.0, 2.0), (50, 9.0, 3.0), (2000, 50.0, 20.0)):
        sigmas = np.linspace(0.05, 3.0, 300) * x / math.sqrt(p)
        tail = stats.ncx2.sf((x / sigmas) ** 2, p, (b / sigmas) ** 2)
        assert np.all(np.diff(tail) >= -1e-12)


@pytest.mark.parametrize("p", [2, 150, 13_700])
def test_single_step_bound_is_the_edge_of_the_confidence_set(p):
    # scipy.stats.ncx2 (not the bound's own fast tail): at the bound σ is outside the set
    # (the bound never exceeds the exact infimum), 10⁻⁶ above it inside (it is not loose)
    rng = np.random.default_rng(p)
    for _ in range(20):
        b = rng.uniform(0.5, 50.0)
        x = b + rng.uniform(0.5, 2.0) * math.sqrt(p)
        for beta in (0.05, 1e-4, 1e-8):
            sigma = gaussian_noise_lcb(x, dim=p, steps=1, signal=b, beta=beta)
            if sigma == 0.0:
                continue
            assert stats.ncx2.sf((x / sigma) ** 2, p, (b / sigma) ** 2) <= beta
            up = sigma * (1 + 1e-6)
            assert stats.ncx2.sf((x / up) ** 2, p, (b / up) ** 2) > beta


def test_poisson_records_bound_spends_its_share_and_covers():
    rng = np.random.default_rng(3)
    p, k, sigma, trials, rate = 40, 2, 0.6, 400, 0.02
    records = rng.binomial(trials, rate, 4000)
    noise = sigma * math.sqrt(k) * np.linalg.norm(rng.standard_normal((4000, p)), axis=1)
    bounds = np.array([NoiseObservation("gaussian", x + r, p, k, trials, rate).lower_bound(BETA)
                       for x, r in zip(noise, records, strict=True)])
    _covers(bounds, sigma, BETA, tight=False)


@pytest.mark.parametrize("steps", [1, 2])
def test_laplace_bound_covers_against_sign_aligned_signal(steps):
    rng = np.random.default_rng(4)
    p, lam, b, n = 30, 0.8, 4.0, (3000 if steps == 1 else 300)
    noise = lam * rng.laplace(size=(n, steps, p)).sum(axis=1)
    norms = np.abs(noise + b * np.sign(noise) / p).sum(axis=1)  # ‖N + S‖₁ = ‖N‖₁ + C·B
    bounds = np.array([laplace_noise_lcb(x, dim=p, steps=steps, signal=b, beta=BETA)
                       for x in norms])
    _covers(bounds, lam, BETA, tight=steps == 1)  # k > 1: a Chernoff quantile, conservative


def test_round_levels_sum_to_beta_and_laws_do_not_pool():
    assert sum(round_level(0.05, j) for j in range(1, 100_000)) == pytest.approx(0.05, rel=1e-4)
    seen = ObservedNoise()
    seen.add(NoiseObservation("gaussian", 100.0, 100, 1, 10, 1.0))
    assert seen.rounds == 1 and 0 < seen.bound < 10
    seen.add(NoiseObservation("laplace", 100.0, 100, 1, 10, 1.0))
    assert seen.bound == 0.0 and "noise law changed" in seen.reason


def _dp_accounting(sigma: float, q: float, count: int, delta: float, kind: str) -> float:
    from dp_accounting import dp_event, pld, rdp

    acc = rdp.RdpAccountant() if kind == "rdp" else pld.PLDAccountant()
    acc.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), count))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("kind", ["rdp", "pld"])
def test_epsilon_at_the_bound_is_dp_accountings(kind):
    events = (ReleaseEvent(GaussianRelease(1.3), 0.05, 20),) * 3
    grid = noise_grid(0.8734)
    assert 0.8734 / 1.01 < grid <= 0.8734
    got = epsilon_at_noise(events, 0.8734, 1e-5, kind, route="rdp")
    expected = _dp_accounting(grid, 0.05, 60, 1e-5, kind)
    if kind == "pld":  # on fedpriv's grid: pessimistic, within PLD_GRID_REL
        assert_pessimistic_close(got, expected)
    else:
        assert got == pytest.approx(expected, rel=1e-6)


def test_unaccountable_bounds_are_infinite_not_errors():
    events = (ReleaseEvent(GaussianRelease(1.0), 0.2, 100),)
    for noise in (0.0, 1e-300, 5e-5):
        assert epsilon_at_noise(events, noise, 1e-5, "pld") == math.inf


def _client_rounds(factor: float, rounds: int, rng: np.random.Generator, ledger: PrivacyLedger,
                   cid: int) -> dict:
    """A client of p = 13,700 (the quickstart's model), one step of L = 32 of n = 143 records
    (Poisson), σ = 1 declared, ``factor·σ`` added, clipped gradients all aligned (the largest
    signal), folded as the server folds them: update recovered from θ, observed by the
    declared mechanism."""
    p, lr, n, batch = 13_700, 0.5, 143, 32
    mech = build_mechanism("gaussian", {"noise_multiplier": 1.0, "clip": 1.0})
    q = batch / n
    theta = rng.standard_normal(p).astype(np.float32)
    direction = rng.standard_normal(p)
    direction /= np.linalg.norm(direction)
    for rnd in range(1, rounds + 1):
        used = rng.binomial(n, q)
        release = (used * direction + factor * rng.standard_normal(p)) / batch
        theta_client = (theta - np.float32(lr) * release.astype(np.float32)).astype(np.float32)
        records = record_count(1, sampling="poisson", local_size=n, sample_rate=q)
        update = client_update(theta, theta_client, lr=lr, steps=1, batch_size=batch,
                               records=records)
        tally = ledger.fold(rnd, cid, mech.release(p), steps=1, sample_rate=q, batch_size=batch,
                            dim=p, verification="consistent", observation=mech.observe(update))
    return tally


def test_under_noising_client_is_seen_and_honest_client_is_near_its_declaration():
    rng = np.random.default_rng(5)
    ledger = PrivacyLedger(1e-5)
    honest = _client_rounds(1.0, 10, rng, ledger, 0)
    cheat = _client_rounds(0.3, 10, rng, ledger, 1)
    declared = honest["epsilon"]
    assert cheat["epsilon"] == declared  # the claim alone cannot tell them apart
    seen_honest, seen_cheat = honest["epsilon_observed"], cheat["epsilon_observed"]
    assert 0.7 < seen_honest["noise_lower"] < 1.0
    assert declared <= seen_honest["value"] < 2.0 * declared
    assert seen_cheat["noise_lower"] < 0.35
    assert seen_cheat["value"] > 5.0 * declared
    assert seen_cheat["assumption"].startswith("per-example clipping")
    assert seen_honest["noise_accounted"] == noise_grid(seen_honest["noise_lower"])
    direct = _dp_accounting(seen_honest["noise_accounted"], 32 / 143, 10, 1e-5, "rdp")
    assert seen_honest["value"] <= direct * (1 + 1e-6)  # route "best": RDP or approach 1
    events = (ReleaseEvent(GaussianRelease(1.0), 32 / 143, 10),)
    assert seen_honest["value"] == epsilon_at_noise(events, seen_honest["noise_lower"], 1e-5)


def test_laplace_client_through_its_mechanism():
    rng = np.random.default_rng(7)
    p, lr, n, batch, lam = 5000, 0.5, 100, 20, 2.0
    mech = build_mechanism("laplace", {"laplace_scale": lam, "clip": 1.0})
    ledger = PrivacyLedger(1e-5)
    theta = rng.standard_normal(p).astype(np.float32)
    records = record_count(1, sampling="fixed", local_size=n, sample_rate=batch / n)
    for rnd in range(1, 6):
        signal = rng.dirichlet(np.ones(p)) * batch  # ‖S‖₁ = C·B
        release = (signal + lam * rng.laplace(size=p)) / batch
        theta_client = (theta - np.float32(lr) * release.astype(np.float32)).astype(np.float32)
        update = client_update(theta, theta_client, lr=lr, steps=1, batch_size=batch,
                               records=records)
        row = ledger.fold(rnd, 0, mech.release(p), steps=1, sample_rate=batch / n,
                          batch_size=batch, dim=p, verification="consistent",
                          observation=mech.observe(update))
    seen = row["epsilon_observed"]
    assert seen["parameter"] == "laplace_scale" and 0.9 * lam < seen["noise_lower"] < lam
    assert row["epsilon"] < seen["value"] < 1.5 * row["epsilon"]


def test_vmf_and_unobserved_rounds_are_infinite_with_the_reason():
    ledger = PrivacyLedger(1e-5)
    vmf = build_mechanism("vmf", {"kappa": 100.0})
    row = ledger.fold(1, 0, vmf.release(50), steps=1, sample_rate=0.1, batch_size=10, dim=50,
                      verification="consistent", observation=vmf.observe(None))  # type: ignore[arg-type]
    assert row["epsilon_observed"]["value"] == math.inf
    assert "fixed norm" in row["epsilon_observed"]["reason"]
    gauss = build_mechanism("gaussian", {}).release(50)
    assert ledger.fold(1, 1, gauss, steps=1, sample_rate=0.1, batch_size=10,
                       dim=50)["epsilon_observed"] is None  # never measured: no column


def test_report_json_csv_and_html_show_lower_declared_and_observed(tmp_path):
    import csv

    from fedpriv.audit import AuditStore, report_run
    from fedpriv.audit.html_report import render_report_html

    rng = np.random.default_rng(6)
    ledger = PrivacyLedger(1e-5)
    tallies = [_client_rounds(1.0, 2, rng, ledger, 0), _client_rounds(0.3, 2, rng, ledger, 1)]
    run_dir = tmp_path / "run"
    with AuditStore.create(run_dir, {"rounds": 1}, seed=0) as store:
        store.begin_round(1)
        for cid, tally in enumerate(tallies):
            store.write_update(1, cid, None, {"mechanism": "gaussian", "status": "ok"})
            store.write_tally(1, cid, {**tally, "epsilon_lower": {"value": 0.1 * (cid + 1)}})
        store.complete_round(1, {"accuracy": 0.5, "loss": 1.0})
    report = report_run(run_dir)
    clients = {c["client_id"]: c for c in report["clients"]}
    for cid, tally in enumerate(tallies):
        seen = clients[cid]["epsilon_observed"]
        assert seen["value"] == tally["epsilon_observed"]["value"]
        assert "round_observation" not in seen and clients[cid]["epsilon_lower"]["value"] > 0
    assert clients[1]["epsilon_observed"]["value"] > 5 * clients[1]["epsilon"]
    with (run_dir / "tallies.csv").open() as handle:
        rows = {int(r["client_id"]): r for r in csv.DictReader(handle)}
    for cid, tally in enumerate(tallies):
        assert float(rows[cid]["epsilon_observed"]) == pytest.approx(
            tally["epsilon_observed"]["value"])
    stored = json.loads(rows[0]["epsilon_observed_json"])
    assert NoiseObservation.from_dict(stored["round_observation"]).law == "gaussian"
    page = render_report_html(report)
    assert "ε observed" in page and "clipped to the declared C" in page
    declared = clients[0]["epsilon_declared"]
    assert f"[0.1, {declared:.3g}, {clients[0]['epsilon_observed']['value']:.3g}]" in page


@pytest.mark.parametrize("observation", [
    NoiseObservation("gaussian", 1e300, 10, 1, 5, 1.0),
    NoiseObservation("gaussian", float("nan"), 10, 1, 5, 1.0),
    NoiseObservation("gaussian", 5.0, 0, 1, 5, 1.0),
    NoiseObservation("laplace", 50.0, 10, 10**9, 5, 1.0),
    NoiseObservation("gaussian", 5.0, 10, 3, 10**12, 0.5),
])
def test_hostile_numbers_are_one_clients_infinity_not_an_error(observation):
    ledger = PrivacyLedger(1e-5, "pld")
    row = ledger.fold(1, 0, GaussianRelease(1.0), steps=1, sample_rate=0.1, batch_size=10,
                      dim=10, verification="consistent", observation=observation)
    assert row["epsilon_observed"]["value"] >= 0.0  # a number (∞ included), not an exception


def test_a_run_observes_every_accepted_reply(tmp_path):
    # the real ServerApp body on an in-process grid: reply → observation → ledger → store →
    # report, and --resume's fold of the stored observations gives the same bound
    from reliability_support import QUICKSTART, LocalGrid, faulty_client_app

    from fedpriv.audit import AuditStore, report_run
    from strategies.server_run import run_federation
    from workflows.config import load_config

    cfg = load_config(QUICKSTART, [
        "rounds=2", "data.num_clients=3", "train.local_steps=1", "train.batch_size=16",
        "mechanism.overrides=[{clients = [2], name = 'vmf', kappa = 500.0}]",
        "audit.attacks=[]"])  # not about attacks: the default attacks one client a round
    run_federation(LocalGrid(faulty_client_app({}), 3, None), cfg, tmp_path / "run")
    clients = {c["client_id"]: c for c in report_run(tmp_path / "run")["clients"]}
    for cid in (0, 1):
        seen = clients[cid]["epsilon_observed"]
        assert seen["rounds"] == 2 and 0.5 < seen["noise_lower"] < 1.0
        assert clients[cid]["epsilon"] < seen["value"] < math.inf
    assert "fixed norm" in clients[2]["epsilon_observed"]["reason"]
    ledger = PrivacyLedger(cfg.audit.delta, cfg.audit.accountant,
                           neighbouring=cfg.audit.neighbouring)
    with AuditStore.open(tmp_path / "run", readonly=True) as store:
        rows = store.query("SELECT round, client_id, epsilon_observed_json FROM tallies "
                           "WHERE client_id = 0 ORDER BY round")
        for update, row in zip([u for u in store.iter_updates() if u.client_id == 0], rows,
                               strict=True):
            report = update.report
            tally = ledger.fold(row["round"], 0, report.mechanism.release(13_700),
                                steps=report.releases, **report.release_sampling,
                                batch_size=report.secret_batch, dim=13_700,
                                verification="consistent",
                                observation=round_observation(
                                    json.loads(row["epsilon_observed_json"])))
    assert tally["epsilon_observed"]["value"] == clients[0]["epsilon_observed"]["value"]


def _tail_excess(sigma: float, x: float, p: int, b: float, beta: float) -> float:
    return float(stats.ncx2.sf((x / sigma) ** 2, p, (b / sigma) ** 2)) - beta


def test_a_declarations_bounds_found_together_are_each_replys_own_and_conservative():
    # issue 37 item 2: the batch's bounds are the per-reply ones bit for bit (element-wise
    # arithmetic), within 10⁻⁹ of brentq's at 10⁻¹³ (the bound before), never inside the set
    rng = np.random.default_rng(37)
    for p, b in ((1, 0.5), (3, 16.0), (150, 4.0), (13_700, 16.0)):
        norms = b + rng.uniform(-0.5, 2.0, 200) * math.sqrt(p)
        norms[:3] = (0.0, b, math.nan)  # within what the signal alone makes: 0
        batch = gaussian_noise_lcbs(norms, dim=p, steps=1, signal=b, beta=1e-3)
        one = [gaussian_noise_lcb(x, dim=p, steps=1, signal=b, beta=1e-3) for x in norms]
        assert batch.tolist() == one and batch[:3].tolist() == [0.0, 0.0, 0.0]
        for x, sigma in zip(norms[3:], batch[3:], strict=True):
            if sigma == 0.0:
                continue
            assert stats.ncx2.sf((x / sigma) ** 2, p, (b / sigma) ** 2) <= 1e-3
            exact = optimize.brentq(_tail_excess, sigma * 0.5, sigma * 2.0, args=(x, p, b, 1e-3),
                                    xtol=1e-14, rtol=1e-13)
            assert exact * (1 - 1e-8) <= sigma <= exact
    k_many = gaussian_noise_lcbs([3.0, 10.0], dim=5, steps=4, signal=2.0, beta=0.1)
    assert k_many.tolist() == [gaussian_noise_lcb(x, dim=5, steps=4, signal=2.0, beta=0.1)
                               for x in (3.0, 10.0)]


def test_a_rounds_observations_grouped_give_each_observations_bound():
    rng = np.random.default_rng(38)
    kinds = [("gaussian", 13_700, 1, 16, 1.0), ("gaussian", 150, 1, 400, 0.04),
             ("gaussian", 150, 1, 20, 1.0), ("gaussian", 150, 1, 300, 0.05),
             ("gaussian", 150, 3, 16, 1.0), ("laplace", 150, 1, 16, 1.0)]  # B's law per reply
    items = []
    for _ in range(60):
        law, p, k, trials, rate = kinds[rng.integers(len(kinds))]
        norm = float(rng.uniform(0.5, 3.0) * (math.sqrt(p) if law == "gaussian" else p))
        items.append((NoiseObservation(law, norm, p, k, trials, rate, 1e-6),
                      round_level(0.05, int(rng.integers(1, 3)))))
    items.append((NoiseObservation("gaussian", 5.0, 0, 1, 16, 1.0), 0.01))  # fails: None
    found = lower_bounds(items)
    assert found[:-1] == [obs.lower_bound(beta) for obs, beta in items[:-1]]
    assert found[-1] is None


def test_a_rounds_bounds_are_what_each_client_would_fold():
    # round_bounds: each client's own level (its rounds so far), None where add must decide
    obs = NoiseObservation("gaussian", 120.0, 13_700, 1, 16, 1.0, 1e-6)
    later, other_law = ObservedNoise(), ObservedNoise()
    later.add(obs)
    other_law.add(NoiseObservation("laplace", 900.0, 150, 1, 16, 1.0))
    found = round_bounds([(1, None, obs), (2, later, obs), (3, other_law, obs), (1, None, obs),
                          (4, None, "not observable: a replayed update"), (5, None, None)])
    fresh, second = ObservedNoise(), ObservedNoise()
    second.add(obs)
    assert found == [fresh.add(obs), second.add(obs), None, None, None, None]


@pytest.mark.parametrize("name", ["gaussian", "laplace"])
def test_an_update_whose_norm_overflows_is_not_observed_as_infinite_noise(name):
    """A hostile update (Δ over lr = 1e-300) has a norm past float64: read as a norm, it would be
    infinite noise and ε_observed ≈ 0; it is not observable instead, so ε_observed is ∞."""
    p, n, batch = 200, 100, 10
    mech = build_mechanism(name, {"clip": 1.0})
    theta = np.zeros(p, np.float32)
    theta_client = np.full(p, 1e30, np.float32)
    records = record_count(1, sampling="fixed", local_size=n, sample_rate=batch / n)
    update = client_update(theta, theta_client, lr=1e-300, steps=1, batch_size=batch,
                           records=records)
    with np.errstate(all="raise"):  # no overflow warning escapes either
        observation = mech.observe(update)
    assert isinstance(observation, str) and "overflows" in observation
    row = PrivacyLedger(1e-5).fold(1, 0, mech.release(p), steps=1, sample_rate=batch / n,
                                   batch_size=batch, dim=p, verification="consistent",
                                   observation=observation)
    assert row["epsilon_observed"]["value"] == math.inf
