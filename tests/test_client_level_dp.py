"""Client-level (update-level) DP, privacy-math.md §11: the ``client-gaussian`` mechanism, its
verification, its accounting against dp-accounting's DpEvent API, its Bayes capacity against
§5's closed form, the client mod on a plain ClientApp against fedpriv's server, and fedpriv's
own ClientApp at the client level."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from label_support import assert_labelled_by_tests
from pld_support import PLD_GRID_REL, assert_pessimistic_close
from reliability_support import QUICKSTART, LocalGrid, faulty_client_app

from clients.client_dp import fedpriv_client_dp_mod
from fedpriv.audit.html_clients import clients_section
from fedpriv.commands.account import account
from fedpriv.errors import InputError
from fedpriv.ledger import PrivacyLedger
from fedpriv.mechanisms import build_mechanism
from fedpriv.protocol import ClientReport
from fedpriv.verification import verify_update
from strategies.server_run import run_federation
from workflows.config import load_config

DELTA = 1e-5
SIGMA, CLIP = 1.5, 1.0


def _dp_accounting(kind: str, event) -> float:  # noqa: ANN001 - a DpEvent
    from dp_accounting import pld, rdp

    acc = rdp.RdpAccountant() if kind == "rdp" else pld.PLDAccountant()
    acc.compose(event)
    return acc.get_epsilon(DELTA)


def _against_server(kind: str, sigma: float, rounds: int) -> float:
    """Replace-one neighbours: the update moves by ≤ 2S, noise σS — dp-accounting's Gaussian
    at σ/2 (sensitivity 1), composed over the rounds taken part in, not subsampled."""
    from dp_accounting import dp_event

    return _dp_accounting(kind, dp_event.SelfComposedDpEvent(
        dp_event.GaussianDpEvent(sigma / 2), rounds))


def _central(kind: str, sigma: float, rate: float, rounds: int) -> float:
    from dp_accounting import dp_event

    return _dp_accounting(kind, dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(rate, dp_event.GaussianDpEvent(sigma)), rounds))


def _report(mechanism, n: int = 10) -> ClientReport:  # noqa: ANN001
    return ClientReport(partition_id=0, server_round=1, local_examples=n, local_steps=1,
                        lr=1.0, batch_size=float(n), sampling="fixed", sample_rate=1.0,
                        mechanism=mechanism)


def _verdict(mechanism, theta: np.ndarray, released: np.ndarray) -> str:  # noqa: ANN001
    report = _report(mechanism)
    return verify_update(report.declaration(), [theta], [released], mechanism.verify,
                         alpha=1e-3).status


def test_the_update_is_clipped_and_noised_with_the_declared_std() -> None:
    mech = build_mechanism("client-gaussian", {"clip": 2.0, "noise_multiplier": 0.0})
    big = [np.full((3, 4), 10.0), np.full(5, -10.0)]
    clipped = mech.privatize_update(big, np.random.default_rng(0))
    assert math.isclose(math.sqrt(sum(float((c**2).sum()) for c in clipped)), 2.0)
    assert np.allclose(clipped[0] / clipped[0][0, 0], 1.0)  # direction kept
    small = [np.full(4, 0.1)]
    assert np.allclose(mech.privatize_update(small, np.random.default_rng(0))[0], 0.1)
    noisy = build_mechanism("client-gaussian", {"clip": 2.0, "noise_multiplier": 1.5})
    out = noisy.privatize_update([np.zeros(200_000)], np.random.default_rng(1))[0]
    assert out.std() == pytest.approx(3.0, rel=0.01)  # σS, standard error ≈ 0.16 %


def test_bad_parameters_are_refused_before_any_message() -> None:
    with pytest.raises(InputError, match="mechanism.clip"):
        fedpriv_client_dp_mod(clip=0.0, noise_multiplier=1.0)
    with pytest.raises(InputError, match="mechanism.noise_multiplier"):
        fedpriv_client_dp_mod(clip=1.0, noise_multiplier=-1.0)
    with pytest.raises(InputError, match="mechanism.clip_per_layer"):
        build_mechanism("client-gaussian", {"clip_per_layer": [1.0, 2.0]})


def test_the_server_verifies_the_release_and_catches_missing_noise_or_clipping() -> None:
    rng = np.random.default_rng(3)
    p = 2000
    theta = rng.normal(size=p).astype(np.float32)
    mech = build_mechanism("client-gaussian", {"clip": CLIP, "noise_multiplier": SIGMA})
    delta = [rng.normal(size=p) * 5]
    for seed in range(5):
        released = mech.privatize_update(delta, np.random.default_rng(seed))[0]
        assert _verdict(mech, theta, (theta + released).astype(np.float32)) == "consistent"
    weak = build_mechanism("client-gaussian", {"clip": CLIP, "noise_multiplier": SIGMA / 3})
    released = weak.privatize_update(delta, rng)[0]  # a third of the declared noise
    assert _verdict(mech, theta, (theta + released).astype(np.float32)) == "inconsistent"
    unclipped = delta[0] + SIGMA * CLIP * rng.normal(size=p)  # noise right, no clipping
    assert _verdict(mech, theta, (theta + unclipped).astype(np.float32)) == "inconsistent"


@pytest.mark.parametrize("kind", ["pld", "rdp"])
def test_client_level_epsilon_matches_dp_accounting(kind: str) -> None:
    """Against the server: replace-one Gaussian over the rounds taken part in; against the
    aggregate: 3 of 10 clients sampled without replacement every round, add/remove — an added
    client displaces a sampled one, so the Poisson-subsampled Gaussian at σ/2 with
    q = 3/11 over every round (privacy-math.md §14; dp-accounting's DpEvents).
    Client 0 takes part in rounds 1, 3 and 5."""
    mech = build_mechanism("client-gaussian", {"clip": CLIP, "noise_multiplier": SIGMA})
    ledger = PrivacyLedger(DELTA, kind)
    row = {}
    for rnd in range(1, 6):
        ledger.sampled(rnd, 3, 10)
        if rnd in (1, 3, 5):
            row = ledger.fold(rnd, 0, mech.release(100), steps=1, sample_rate=1.0,
                              batch_size=1.0, dim=100, verification="consistent", unit="client")
    server, central = _against_server(kind, SIGMA, 3), _central(kind, SIGMA / 2, 3 / 11, 5)
    if kind == "pld":  # on fedpriv's grid: pessimistic, within PLD_GRID_REL
        assert_pessimistic_close(row["epsilon"], server)
    elif row["route"] == "rdp":
        assert row["epsilon"] == pytest.approx(server, rel=1e-6)
    else:  # fedpriv's best RDP route may beat the classic conversion, never lose to it
        assert row["epsilon"] <= server * (1 + 1e-9)
    assert row["epsilon_central"] <= central * (1 + (PLD_GRID_REL if kind == "pld" else 1e-6))
    if kind == "pld":
        assert_pessimistic_close(row["epsilon_central"], central)
    assert (row["unit"], row["releases"], row["compose"], row["client_rate"]) == (
        "client", 3, "per-round", 0.3)
    assert "replace" in row["neighbouring"] and row["guarantee"] == "verified"
    assert row["central_sampling"] == "fixed-size: 3 of 10 clients without replacement"
    assert row["central_neighbouring"] == "add-remove one client"


def test_client_level_capacity_is_the_gaussian_closed_form_at_r_equal_s() -> None:
    """§5 at p = 1: ``C = 1 + 2r/(s√(2π))`` with ``r = S`` and ``s = σS``; two rounds add."""
    mech = build_mechanism("client-gaussian", {"clip": 3.0, "noise_multiplier": SIGMA})
    ledger = PrivacyLedger(DELTA, "pld", threat_model="batch")
    for rnd in (1, 2):
        row = ledger.fold(rnd, 0, mech.release(1), steps=1, sample_rate=1.0, batch_size=1.0,
                          dim=1, unit="client")
    expected = 2 * math.log(1 + 2 / (SIGMA * math.sqrt(2 * math.pi)))
    assert row["log_capacity_cumulative"] == pytest.approx(expected, rel=1e-10)


def test_record_level_tallies_name_their_unit() -> None:
    gauss = build_mechanism("gaussian", {"noise_multiplier": SIGMA})
    row = PrivacyLedger(DELTA).fold(1, 0, gauss.release(10), steps=2, sample_rate=0.1,
                                    batch_size=4, dim=10)
    assert (row["unit"], row["neighbouring"], row["epsilon_central"]) == (
        "record", "add-remove one record", None)
    assert row["sampling"] == "poisson"


# -- against fedpriv's server, in process ---------------------------------------------------

SETTINGS = ["rounds=2", "data.num_clients=3", "train.fraction_train=1.0", "audit.delta=1e-5",
            "audit.accountant='pld'",
            "audit.attacks=[]"]  # not about attacks: the default attacks one client a round


def _plain_app(seed: int, sizes: list[int]) -> ClientApp:
    """A ClientApp that knows nothing of fedpriv: a few gradient steps of its own toward a
    target of its own, replying as Flower's quickstarts do with its partition's size
    (``sizes``: the server checks it, as a record-level client's); the mod privatises its
    reply."""
    app = ClientApp()

    @app.train(mods=[fedpriv_client_dp_mod(clip=CLIP, noise_multiplier=SIGMA, seed=seed)])
    def train(msg: Message, context: Context) -> Message:
        received = msg.content["arrays"]
        rng = np.random.default_rng(int(context.node_config["partition-id"]))
        state = {}
        for key, array in zip(received.keys(), received.to_numpy_ndarrays(), strict=True):
            target = rng.normal(size=array.shape).astype(array.dtype)
            for _ in range(3):
                array = array - 0.1 * (array - target)
            state[key] = array
        n = sizes[int(context.node_config["partition-id"])]
        content = RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in state.items()}),
                              "metrics": MetricRecord({"num-examples": n, "train-loss": 0.0})})
        return Message(content=content, reply_to=msg)

    return app


def _sizes(cfg) -> list[int]:  # noqa: ANN001 - a Config
    from strategies.identity import partition_sizes
    from strategies.server_run import dataset_of

    return partition_sizes(cfg, dataset_of(cfg))


def test_the_mod_on_a_plain_client_app_is_verified_and_accounted(tmp_path) -> None:  # noqa: ANN001
    # the server's config names the mechanism the mod declares: it believes its instructions
    cfg = load_config(QUICKSTART, [*SETTINGS, "mechanism.name='client-gaussian'",
                                   f"mechanism.clip={CLIP}", f"mechanism.noise_multiplier={SIGMA}"])
    report = run_federation(LocalGrid(_plain_app(7, _sizes(cfg)), 3), cfg, tmp_path / "run")
    clients = report["clients"]
    assert [c["rounds_participated"] for c in clients] == [2, 2, 2]
    expected = _against_server("pld", SIGMA, 2)
    central = _central("pld", SIGMA, 1.0, 2)
    for c in clients:
        assert (c["mechanism"], c["unit"]) == ("client-gaussian", "client")
        assert_labelled_by_tests(c)
        assert_pessimistic_close(c["epsilon"], expected)  # the tightest route: the PLD
        assert_pessimistic_close(c["epsilon_central"], central)
        assert c["client_rate"] == 1.0 and c["releases"] == 2


def test_a_client_level_size_is_checked_as_a_record_level_one_in_simulation(tmp_path) -> None:  # noqa: ANN001
    """Issue 42, item 5: the mod's client declaring n = 10⁹ (its num-examples) is
    ``size-sampling`` inconsistent with the partition the server computes, and not aggregated
    (before: unverifiable, aggregated at 10 × the round's median weight)."""
    cfg = load_config(QUICKSTART, [*SETTINGS, "mechanism.name='client-gaussian'",
                                   f"mechanism.clip={CLIP}", f"mechanism.noise_multiplier={SIGMA}"])
    sizes = _sizes(cfg)
    sizes[1] = 10**9
    report = run_federation(LocalGrid(_plain_app(7, sizes), 3), cfg, tmp_path / "run")
    assert report["status"] == "completed"
    assert [c["rounds_participated"] for c in report["clients"]] == [2, 0, 2]
    (liar,) = [c for c in report["clients"] if c["client_id"] == 1]
    parts = {p["test"]: p for p in liar["verification"]["parts"]}
    assert parts["size-sampling"]["status"] == "inconsistent", parts["size-sampling"]
    assert report["unverified_share"] == [0.0, 0.0]


def test_fedpriv_client_app_at_the_client_level_trains_plainly_and_is_verified(tmp_path) -> None:  # noqa: ANN001
    cfg = load_config(QUICKSTART, [*SETTINGS, "mechanism.name='client-gaussian'",
                                   f"mechanism.noise_multiplier={SIGMA}",
                                   "train.local_steps=2", "train.lr=0.5"])
    report = run_federation(LocalGrid(faulty_client_app({}), 3), cfg, tmp_path / "run")
    for c in report["clients"]:
        assert (c["unit"], c["compose"]) == ("client", "per-round")
        assert_labelled_by_tests(c)
        assert_pessimistic_close(c["epsilon"], _against_server("pld", SIGMA, 2))
    _, _, html = clients_section(report["clients"])
    assert "unit" in str(html) and "ε aggregate" in str(html) and "client-gaussian" in str(html)


def test_the_mod_passes_other_messages_and_names_what_a_reply_lacks() -> None:
    LocalGrid(ClientApp(), 1)  # sets Flower's task identity, so messages can be built here
    mod = fedpriv_client_dp_mod(clip=CLIP, noise_multiplier=SIGMA, seed=0)
    context = Context(run_id=1, node_id=1, state=RecordDict(), run_config={},
                      node_config={"partition-id": 0})
    arrays = ArrayRecord({"w": Array(np.zeros(3, np.float32))})
    evaluate = Message(RecordDict({"arrays": arrays}), dst_node_id=1, message_type="evaluate")
    answer = Message(RecordDict({"metrics": MetricRecord({"x": 1.0})}), reply_to=evaluate)
    assert mod(evaluate, context, lambda m, c: answer) is answer
    train = Message(RecordDict({"arrays": arrays, "config": ConfigRecord({"server-round": 1})}),
                    dst_node_id=1, message_type="train")
    no_count = Message(RecordDict({"arrays": arrays, "metrics": MetricRecord({"loss": 0.0})}),
                       reply_to=train)
    reply = mod(train, context, lambda m, c: no_count)
    assert reply.has_error() and "num-examples" in reply.error.reason


@pytest.mark.parametrize("relation", ["add-remove", "replace-one"])
def test_fedavg_samples_a_fixed_number_of_clients_and_central_epsilon_says_so(
        tmp_path, relation: str) -> None:  # noqa: ANN001
    """Issue 38: FedAvg samples 2 of the 4 clients each round without replacement; the central
    ε is the fixed-size one that ``fedpriv account`` gives for it (not Poisson at q = 1/2), and
    every client-level tally names its sampling and relation."""
    cfg = load_config(QUICKSTART, ["rounds=3", "data.num_clients=4", "train.fraction_train=0.5",
                                   "mechanism.name='client-gaussian'", f"mechanism.clip={CLIP}",
                                   f"mechanism.noise_multiplier={SIGMA}",
                                   f"audit.neighbouring='{relation}'", "audit.attacks=[]"])
    report = run_federation(LocalGrid(_plain_app(7, _sizes(cfg)), 4), cfg, tmp_path / "run")
    fixed = account("gaussian", noise_multiplier=SIGMA, sampling="fixed-size", population=4,
                    sample_size=2, steps=3, neighbouring=relation)["epsilon"]
    poisson = account("gaussian", noise_multiplier=SIGMA, sample_rate=0.5, steps=3)["epsilon"]
    took_part = [c for c in report["clients"] if c["rounds_participated"] > 0]
    assert took_part and sum(c["rounds_participated"] for c in report["clients"]) == 6
    for c in took_part:
        assert c["epsilon_central"] == pytest.approx(fixed, rel=1e-12)
        assert c["client_rate"] == 0.5
        assert c["central_sampling"] == "fixed-size: 2 of 4 clients without replacement"
        assert c["central_neighbouring"] == f"{relation} one client"
    if relation == "add-remove":
        assert fixed > poisson  # the Poisson model understated it
