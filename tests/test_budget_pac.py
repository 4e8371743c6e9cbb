"""Issue #18 in a run: per-client ε budgets and the PAC robustness fields.

A client declines the round that would take it over its budget, the server stops selecting it,
the report says when — and the number of rounds it trains is the count ``fedpriv account``
gives (the largest k with ε(k·steps releases) ≤ B at the same q, δ and accountant;
``--target-epsilon B`` at k rounds calibrates the noise that allows exactly k). Every tally
carries the PAC accuracy of the declared release and Theorem 4.3's confidence, checked against
closed forms. The runs use the in-process grid (no Ray)."""

from __future__ import annotations

import csv
import math

import pytest
from reliability_support import QUICKSTART, Killed, LocalGrid

from clients.client_app import app
from clients.local_data import client_data
from fedpriv.accounting import NoGuarantee
from fedpriv.budget import check_budget, decode_releases, encode_releases
from fedpriv.commands.account import account
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism, make_release
from fedpriv.protocol import ClientReport, ReplyError
from strategies.server_run import run_federation
from workflows.config import load_config

DELTA, STEPS, ROUNDS, BATCH = 1e-5, 2, 5, 16
# audit.attacks=[]: not about attacks (the default attacks one client a round)
BASE = [f"rounds={ROUNDS}", "data.num_clients=3", f"train.local_steps={STEPS}",
        "train.lr=1.0", f"train.batch_size={BATCH}", "audit.attacks=[]"]  # fmt: skip
BUDGET, TRAINED = 1.0, 3  # client 0: sigma calibrated so that exactly 3 rounds fit


def _rate(cfg, pid: int) -> float:  # noqa: ANN001
    n = int(client_data(cfg.data, cfg.seed, pid, cfg.data.num_clients)[0].shape[0])
    return min(cfg.train.batch_size, n) / n


def _eps(sigma: float, q: float, releases: int, accountant: str | None = None) -> float:
    return account("gaussian", noise_multiplier=sigma, sample_rate=q, steps=releases,
                   delta=DELTA, accountant=accountant)["epsilon"]


def _allowed(sigma: float, q: float, budget: float) -> int:
    """The largest k <= ROUNDS with eps(k * STEPS releases) <= budget, by fedpriv account."""
    return max([0, *(k for k in range(1, ROUNDS + 1) if _eps(sigma, q, k * STEPS) <= budget)])


@pytest.fixture(scope="module")
def setting():
    """Client 0: Gaussian at the sigma `fedpriv account --target-epsilon` calibrates for BUDGET
    at TRAINED rounds; client 1: Laplace (never exhausted here); client 2: a budget of its own
    that allows exactly one round."""
    cfg = load_config(QUICKSTART, BASE)
    q = [_rate(cfg, pid) for pid in range(3)]
    sigma = account("gaussian", target_epsilon=BUDGET, sample_rate=q[0],
                    steps=TRAINED * STEPS, delta=DELTA)["noise_multiplier"]
    small = _eps(sigma, q[2], STEPS) * (1 + 1e-9)
    overrides = ("[{clients = [1], name = 'laplace', laplace_scale = 50.0}, "
                 f"{{clients = [2], epsilon_budget = {small!r}}}]")
    cfg = load_config(QUICKSTART, [*BASE, f"mechanism.noise_multiplier={sigma!r}",
                                   f"mechanism.epsilon_budget={BUDGET}",
                                   f"mechanism.overrides={overrides}"])
    return cfg, sigma, q, {0: BUDGET, 1: BUDGET, 2: small}


def _run(cfg, run_dir, stop_at=None, resume=False):  # noqa: ANN001, ANN202
    return run_federation(LocalGrid(app, cfg.data.num_clients, stop_at=stop_at), cfg, run_dir,
                          resume=resume)


@pytest.fixture(scope="module")
def run(setting, tmp_path_factory):
    cfg = setting[0]
    run_dir = tmp_path_factory.mktemp("budget") / "run"
    return run_dir, _run(cfg, run_dir)


def _client(report: dict, pid: int) -> dict:
    return next(c for c in report["clients"] if c["client_id"] == pid)


def test_rounds_trained_are_what_fedpriv_account_allows(setting, run) -> None:
    _, sigma, q, budgets = setting
    _, report = run
    assert report["status"] == "completed" and report["rounds"] == ROUNDS
    assert report["integrity"]["ok"], report["integrity"]["problems"]
    for pid in (0, 2):
        k = _allowed(sigma, q[pid], budgets[pid])
        client = _client(report, pid)
        assert client["rounds_participated"] == k
        assert client["budget"] == {"epsilon_budget": budgets[pid], "exhausted_round": k + 1}
        statuses = [(r["round"], r["update_status"]) for r in client["per_round"]]
        assert statuses == [*((r, "ok") for r in range(1, k + 1)), (k + 1, "declined")]
        assert client["epsilon"] == pytest.approx(_eps(sigma, q[pid], k * STEPS), rel=1e-9)
        assert all(r["epsilon"] <= budgets[pid] for r in client["per_round"])
    assert _client(report, 0)["rounds_participated"] == TRAINED  # the calibrated count
    assert _client(report, 2)["rounds_participated"] == 1
    laplace = _client(report, 1)
    assert laplace["rounds_participated"] == ROUNDS
    assert laplace["budget"] == {"epsilon_budget": BUDGET, "exhausted_round": None}


def test_a_decline_is_recorded_not_a_fault(setting, run) -> None:
    _, report = run
    declined = [f for f in report["failures"] if f["kind"] == "declined"]
    assert sorted((f["round"], f["client_id"]) for f in declined) == [(2, 2), (TRAINED + 1, 0)]
    assert all("epsilon budget exhausted" in f["message"] for f in declined)
    assert all(f["kind"] == "declined" for f in report["failures"])
    client = _client(report, 0)
    last_ok, decline = client["per_round"][TRAINED - 1], client["per_round"][TRAINED]
    assert decline["epsilon"] == last_ok["epsilon"] and decline["log_capacity_round"] == 0.0


def test_budget_and_pac_columns_reach_tallies_csv(setting, run) -> None:
    cfg, sigma, q, budgets = setting
    run_dir, report = run
    with open(run_dir / "tallies.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {"pac_accuracy", "pac_robust_confidence", "epsilon_budget"} <= set(rows[0])
    for row in rows:
        assert float(row["epsilon_budget"]) == pytest.approx(budgets[int(row["client_id"])])
        assert row["pac_accuracy"] and row["pac_robust_confidence"]
    assert {float(r["pac_robust_confidence"]) for r in rows if r["client_id"] == "0"} == {0.0}
    assert _client(report, 0)["pac_robust_confidence"] == "vacuous"  # Gaussian: no MBP bound


def test_pac_fields_against_independent_formulas(setting, run) -> None:
    """Gaussian alpha = sigma C chi_p^-1(1 - beta) / L; Laplace alpha = lambda C
    Gamma_p^-1(1 - beta) / L (l1); Laplace confidence 1 - (1 + 4 xi) beta with the cumulative
    record-level bound xi = releases * 2/lambda (privacy-math.md section 6)."""
    from scipy import stats

    cfg, sigma, q, _ = setting
    _, report = run
    beta, dim = cfg.audit.pac_beta, 13_700
    gauss = _client(report, 0)
    assert gauss["pac_accuracy"] == pytest.approx(
        sigma * math.sqrt(stats.chi2.ppf(1 - beta, dim)) / BATCH, rel=1e-9)
    laplace = _client(report, 1)
    assert laplace["pac_accuracy"] == pytest.approx(
        50.0 * stats.gamma.ppf(1 - beta, dim) / BATCH, rel=1e-9)
    for entry in laplace["per_round"]:
        xi = entry["round"] * STEPS * 2 / 50.0
        assert entry["mbp_bound"] == pytest.approx(xi)
        assert entry["pac_robust_confidence"] == pytest.approx(1 - (1 + 4 * xi) * beta)


def test_resumed_run_spends_no_more_than_the_uninterrupted_one(setting, run, tmp_path) -> None:
    """A resumed run starts its clients with empty state: the releases the server accounted
    (sent with every train message) keep them from spending their budget twice."""
    cfg = setting[0]
    _, reference = run
    run_dir = tmp_path / "run"
    with pytest.raises(Killed):
        _run(cfg, run_dir, stop_at=3)
    resumed = _run(cfg, run_dir, resume=True)
    for pid in range(3):
        a, b = _client(resumed, pid), _client(reference, pid)
        assert a["rounds_participated"] == b["rounds_participated"]
        assert a["epsilon"] == b["epsilon"] and a["budget"] == b["budget"]


def test_quickstart_with_a_budget_of_5(tmp_path) -> None:
    """The acceptance run: quickstart, `--set mechanism.epsilon_budget=5`. One quickstart round
    (20 releases at q = 32/n, sigma = 1) already costs more (about 8.3 by RDP), so every client
    declines in round 1, at epsilon 0, and trains no round."""
    cfg = load_config(QUICKSTART, ["mechanism.epsilon_budget=5"])
    report = _run(cfg, tmp_path / "run")
    assert report["status"] == "completed" and len(report["clients"]) == 10
    for client in report["clients"]:
        q = _rate(cfg, client["client_id"])
        first = account("gaussian", noise_multiplier=1.0, sample_rate=q, steps=20,
                        delta=DELTA, accountant="rdp")["epsilon"]
        assert first > 5.0
        assert client["budget"] == {"epsilon_budget": 5.0, "exhausted_round": 1}
        assert client["epsilon"] == 0.0 and client["rounds_participated"] == 0
        assert client["pac_accuracy"] is None and client["pac_robust_confidence"] is None


def test_pac_at_the_mbp_estimate(tmp_path) -> None:
    """With the Bayesian-privacy estimate on, the tally's details carry Theorem 4.3 at the
    estimate: 1 - (1 + 4 xi_hat) beta, beside the column at the bound."""
    cfg = load_config(QUICKSTART, [
        "rounds=1", "data.num_clients=2", "train.local_steps=1", "train.batch_size=1",
        "mechanism.name=laplace", "mechanism.laplace_scale=20.0", "audit.ground_truth=true",
        "audit.attacks=['idlg']", "audit.iterations=5", "audit.bayes_runs=2", "audit.clients=1",
    ])  # fmt: skip
    report = _run(cfg, tmp_path / "run")
    beta, attacked = cfg.audit.pac_beta, _client(report, 0)
    estimate = attacked["pac_estimate"]
    assert estimate["eps_mbp"] == attacked["mbp_estimate"] and estimate["beta"] == beta
    assert estimate["confidence"] == pytest.approx(1 - (1 + 4 * attacked["mbp_estimate"]) * beta)
    assert attacked["pac_robust_confidence"] == pytest.approx(1 - (1 + 4 * 2 / 20.0) * beta)
    assert _client(report, 1)["pac_estimate"] is None  # not attacked


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_check_budget_is_the_accountant_of_fedpriv_account(accountant: str) -> None:
    release, q = make_release("gaussian", 1.3), 0.05
    check = check_budget(2.0, release, sample_rate=q, released=40, steps=10, delta=DELTA,
                         accountant=accountant)
    assert check.epsilon_next == pytest.approx(_eps(1.3, q, 50, accountant), rel=1e-12)
    assert check.within == (check.epsilon_next <= 2.0)
    assert "40 releases so far and 10 more" in check.reason()
    none = check_budget(1e9, NoGuarantee("clip"), sample_rate=q, released=0, steps=1,
                        delta=DELTA)
    assert none.epsilon_next == math.inf and not none.within  # no guarantee: never trains


def test_budget_configuration() -> None:
    cfg = load_config(None, ["mechanism.epsilon_budget=4",
                             "mechanism.overrides=[{clients = [1], epsilon_budget = 2}]"])
    assert (cfg.mechanism.budget_for(0), cfg.mechanism.budget_for(1)) == (4.0, 2.0)
    assert "epsilon_budget" not in cfg.mechanism.for_client(1)[1]  # not a mechanism parameter
    assert cfg.mechanism.has_budgets and not load_config(None).mechanism.has_budgets
    assert load_config(None, []).mechanism.budget_for(0) is None
    again = load_config(None, ["mechanism.epsilon_budget=4"]).to_dict()["mechanism"]
    assert again["epsilon_budget"] == 4.0
    bad = [(["mechanism.epsilon_budget=0"], "mechanism.epsilon_budget"),
           (["mechanism.epsilon_budget=inf"], "mechanism.epsilon_budget"),
           (["mechanism.epsilon_budget='5'"], "mechanism.epsilon_budget"),
           (["mechanism.overrides=[{clients = [0], epsilon_budget = -1}]"],
            "mechanism.overrides[0].epsilon_budget"),
           (["audit.pac_beta=0"], "audit.pac_beta"), (["audit.pac_beta=1"], "audit.pac_beta")]
    for overrides, key in bad:
        with pytest.raises(InputError) as err:
            load_config(None, overrides)
        assert err.value.key == key


def test_report_fields_round_trip_and_are_checked() -> None:
    report = ClientReport(0, 3, 100, 2, 0.5, 16.0, "poisson", 0.16,
                          build_mechanism("gaussian", {"noise_multiplier": 1.0}),
                          epsilon_budget=5.0, declined="no budget")
    again = ClientReport.from_config(report.to_config())
    assert (again.epsilon_budget, again.declined) == (5.0, "no budget")
    plain = ClientReport.from_config({**report.to_config(), "epsilon-budget": None,
                                      "declined": None})
    assert (plain.epsilon_budget, plain.declined) == (None, None)
    for key, value in (("epsilon-budget", 0.0), ("epsilon-budget", "5"), ("declined", ""),
                       ("declined", 3), ("declined", "x" * 1001)):
        with pytest.raises(ReplyError) as err:
            ClientReport.from_config({**report.to_config(), key: value})
        assert err.value.field == key
    assert decode_releases(encode_releases({0: 4, 7: 10}), 7) == 10
    assert decode_releases(encode_releases({0: 4}), 3) == 0
    for text in ("[1]", '{"0": -1}', '{"0": true}', "x"):
        with pytest.raises(ValueError):
            decode_releases(text, 0)
