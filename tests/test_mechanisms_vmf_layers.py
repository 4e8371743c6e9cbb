"""Multi-variate (per-layer) VMF (privacy-math.md §12; Biswas et al., Prop. 2): its ε against
an independent summed per-layer RDP, its released block norms, its per-block mean cosine, its
verification, its config errors, and ``whole`` unchanged."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import torch
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from scipy.special import ive

from fedpriv.accounting import ClientAccountant
from fedpriv.accounting.conversion import DEFAULT_ORDERS
from fedpriv.errors import InputError
from fedpriv.gradients import PerExampleGradients
from fedpriv.gradients.clipping import clipped_sum
from fedpriv.leakage.capacity import log_capacity_vmf
from fedpriv.mechanisms import build_mechanism, make_generator
from fedpriv.mechanisms.vmf import VMFLayersRelease, VMFRelease
from fedpriv.special.vmf_sampler import sample_vmf
from fedpriv.verification import client_update, record_count

DIMS = [150, 750, 12_800]  # the paper MLP's layer sizes quoted in issue 29


def _per_layer(**params) -> object:
    return build_mechanism("vmf", {"kappa": 75.0, "vmf_layers": "per-layer",
                                   "vmf_layer_dims": DIMS, **params})


def _prop1_mpmath(alpha: float, kappa: float, dim: int) -> float:
    """Biswas et al., Prop. 1 at 50 digits with mpmath's own Bessel function (independent of
    fedpriv's Debye/log-space numerics)."""
    mp.mp.dps = 50
    nu, a, k = mp.mpf(dim) / 2 - 1, mp.mpf(alpha), mp.mpf(kappa)
    value = (nu * mp.log(1 / (2 * a - 1))
             + mp.log(mp.besseli(nu, (2 * a - 1) * k)) - mp.log(mp.besseli(nu, k))) / (a - 1)
    return float(value)


def test_epsilon_is_the_summed_per_layer_rdp_converted_independently():
    kappas, steps, delta = (40.0, 75.0, 120.0), 30, 1e-5
    mech = _per_layer(vmf_kappas=list(kappas))
    release = mech.release(sum(DIMS))
    assert isinstance(release, VMFLayersRelease)
    orders = np.array([a for a in DEFAULT_ORDERS if a <= 64])  # the grid's useful part here
    independent = np.array([sum(_prop1_mpmath(a, k, p) for k, p in zip(kappas, DIMS, strict=True))
                            for a in orders])
    np.testing.assert_allclose(release.rdp(orders), independent, rtol=1e-9)
    expected, _ = compute_epsilon(orders, steps * independent, delta)
    acc = ClientAccountant("rdp", route="rdp")
    acc.record(release, 1.0, steps)
    assert acc.epsilon(delta) == pytest.approx(expected, rel=1e-6)
    # Prop. 3: the one-block VMF at the same κ is strictly cheaper than any split
    whole = VMFRelease(75.0, sum(DIMS)).rdp(orders)
    assert np.all(_per_layer().release(sum(DIMS)).rdp(orders) > whole)


def test_capacity_and_pure_bound_add_over_blocks():
    release = VMFLayersRelease((2.0, 5.0), (3, 3))
    # p = 3: C = κ e^κ / sinh κ (privacy-math.md §5), independently
    expected = sum(math.log(k * math.exp(k) / math.sinh(k)) for k in (2.0, 5.0))
    assert release.log_bayes_capacity(6, 1.0) == pytest.approx(expected, rel=1e-10)
    assert release.pure_ldp_epsilon(1.0) == pytest.approx(14.0)
    assert log_capacity_vmf(3, 2.0) < release.log_bayes_capacity(6, 1.0)


def test_pld_composes_blocks_without_subsampling_and_convolves_them_with_it():
    release = VMFLayersRelease((3.0, 3.0), (5, 5))
    one = VMFRelease(3.0, 5).pld(1.0, 1e-4)
    both = release.pld(1.0, 1e-4)
    expected = one.compose(one).get_epsilon_for_delta(1e-5)
    assert both.get_epsilon_for_delta(1e-5) == pytest.approx(expected, rel=1e-9)
    # and it lies below the pure bound Σ 2κ_r = 12, above one block's ε
    assert one.get_epsilon_for_delta(1e-5) < expected < 12.0
    # sampled: the product's PLD (fedpriv/accounting/vmf_layers_pld.py), below the unsampled
    sampled = release.pld(0.1, 1e-4).get_epsilon_for_delta(1e-5)
    assert 0.0 < sampled < expected


def test_release_blocks_have_the_public_scales_as_norms():
    clips = [0.5, 1.0, 2.0]
    mech = _per_layer(clip_per_layer=clips)
    scales = mech.block_scales
    assert scales == pytest.approx(clips)  # default s = ‖C‖, so s_r = C_r
    flat = _per_layer(clip=3.0)
    assert flat.block_scales == pytest.approx([3.0 / math.sqrt(3)] * 3)
    gen = make_generator(1, 0, 1)
    grads = torch.randn(16, sum(DIMS), generator=gen)
    out = mech.privatize(PerExampleGradients(grads, layer_sizes=tuple(DIMS)), gen,
                         batch_size=16.0)
    norms = [float(b.norm()) for b in out.split(DIMS)]
    assert norms == pytest.approx(clips, rel=1e-5)


def _cosines(kappa: float, dims: list[int], draws: int) -> np.ndarray:
    """``(draws, R)`` cosines of each released block to its block of the clipped sum."""
    mech = build_mechanism("vmf", {"kappa": kappa, "vmf_layers": "per-layer",
                                   "vmf_layer_dims": dims})
    gen = make_generator(2, 0, 1)
    truth = torch.randn(sum(dims), generator=gen, dtype=torch.float64)
    blocks = truth.split(dims)
    cos = np.zeros((draws, len(dims)))
    for i in range(draws):
        out = mech._release(truth, gen, 1.0).split(dims)
        for r, (y, u) in enumerate(zip(out, blocks, strict=True)):
            cos[i, r] = float(y @ u / (y.norm() * u.norm()))
    return cos


def test_mean_cosine_per_block_is_the_mean_resultant_length():
    kappa, dims, draws = 20.0, [5, 50, 500], 400
    cos = _cosines(kappa, dims, draws)
    got, se = cos.mean(axis=0), cos.std(axis=0, ddof=1) / math.sqrt(draws)
    for p, g, e in zip(dims, got, se, strict=True):
        a_p = ive(p / 2, kappa) / ive(p / 2 - 1, kappa)  # E[xᵀy] = A_p(κ), §2
        assert abs(g - a_p) < 5 * e, (p, g, a_p, e)
    assert got[0] > got[1] > got[2]  # larger at small p_r for the same κ
    assert got[2] > 10 * se[2]  # the tolerance is far below the effect at the largest block


def test_whole_is_bitwise_todays_release_and_declaration():
    default = build_mechanism("vmf", {"kappa": 50.0, "clip": 0.7})
    explicit = build_mechanism("vmf", {"kappa": 50.0, "clip": 0.7, "vmf_layers": "whole"})
    assert explicit == default
    assert set(default.params()) == {"clip", "kappa", "vmf_scale", "vmf_keep_norm"}
    grads = torch.randn(8, 40, generator=torch.Generator().manual_seed(0))
    a = default.privatize(PerExampleGradients(grads), make_generator(3, 0, 1), batch_size=8.0)
    # today's code path, by hand: the library's flat clipped sum, normalise, one VMF draw, ×s
    gen = make_generator(3, 0, 1)
    total = clipped_sum(grads, [0.7])
    b = sample_vmf(total / float(total.norm()), 50.0, gen) * 0.7
    assert torch.equal(a, b)
    assert default.release(40) == VMFRelease(50.0, 40)


def test_verification_checks_every_block_norm():
    mech = _per_layer(kappa=100.0)
    gen = make_generator(5, 0, 1)
    grads = torch.randn(8, sum(DIMS), generator=gen)
    source = PerExampleGradients(grads, layer_sizes=tuple(DIMS))
    release = mech.privatize(source, gen, batch_size=8.0).numpy()
    theta = np.random.default_rng(0).standard_normal(sum(DIMS)).astype(np.float32)
    after = (theta - np.float32(0.1) * release).astype(np.float32)
    records = record_count(1, batch_sizes=[8])
    update = client_update(theta, after, lr=0.1, steps=1, batch_size=8.0, records=records)
    assert mech.verify(update, 0.01).status == "consistent"
    # the same total norm, moved between blocks: each block is checked at its own scale
    s = mech.block_scales
    moved = release.copy()
    moved[:DIMS[0]] *= 1.2
    moved[DIMS[0]:] *= math.sqrt((s[1] ** 2 + s[2] ** 2 - (0.44 * s[0] ** 2))
                                 / (s[1] ** 2 + s[2] ** 2))
    assert np.linalg.norm(moved) == pytest.approx(np.linalg.norm(release), rel=1e-4)
    after = (theta - np.float32(0.1) * moved).astype(np.float32)
    bad = client_update(theta, after, lr=0.1, steps=1, batch_size=8.0, records=records)
    verdict = mech.verify(bad, 0.01)
    assert verdict.status == "inconsistent" and "block 0" in verdict.reason


@pytest.mark.parametrize(("params", "key"), [
    ({"vmf_layers": "layers"}, "mechanism.vmf_layers"),
    ({"vmf_layers": "per-layer"}, "mechanism.vmf_layer_dims"),
    ({"vmf_layers": "per-layer", "vmf_layer_dims": [10, 1]}, "mechanism.vmf_layer_dims"),
    ({"vmf_layers": "per-layer", "vmf_layer_dims": [10, 2.5]}, "mechanism.vmf_layer_dims"),
    ({"vmf_layers": "per-layer", "vmf_layer_dims": [10, 5], "vmf_kappas": [1.0]},
     "mechanism.vmf_kappas"),
    ({"vmf_layers": "per-layer", "vmf_layer_dims": [10, 5], "vmf_kappas": [1.0, -2.0]},
     "mechanism.vmf_kappas"),
    ({"vmf_layers": "per-layer", "vmf_layer_dims": [10, 5], "clip_per_layer": [1.0]},
     "mechanism.clip_per_layer"),
    ({"vmf_layers": "per-layer", "vmf_layer_dims": [10, 5], "vmf_keep_norm": True},
     "mechanism.vmf_keep_norm"),
    ({"vmf_kappas": [1.0, 2.0]}, "mechanism.vmf_kappas"),
    ({"vmf_layer_dims": [10, 5]}, "mechanism.vmf_layer_dims"),
])
def test_bad_config_names_the_key(params: dict, key: str):
    with pytest.raises(InputError) as err:
        build_mechanism("vmf", params)
    assert err.value.key == key


def test_check_layers_compares_with_the_model():
    mech = build_mechanism("vmf", {"vmf_layers": "per-layer", "vmf_layer_dims": [10, 5]})
    mech.check_layers([10, 5])
    with pytest.raises(InputError) as err:
        mech.check_layers([5, 10])
    assert err.value.key == "mechanism.vmf_layer_dims" and "[5, 10]" in str(err.value)
    with pytest.raises(InputError) as err:
        build_mechanism("vmf", {"vmf_layers": "per-layer", "vmf_layer_dims": [10, 5],
                                "vmf_kappas": [1.0, 2.0]}).check_layers([10, 3, 2])
    assert err.value.key == "mechanism.vmf_kappas"
    # a declaration that does not fit the model has no accountable guarantee
    assert not mech.release(16).formal_guarantee


def test_ledger_tallies_the_per_layer_release():
    from fedpriv.ledger import PrivacyLedger

    mech = _per_layer(vmf_kappas=[40.0, 75.0, 120.0])
    release, dim = mech.release(sum(DIMS)), sum(DIMS)
    ledger = PrivacyLedger(1e-5, "rdp")
    for rnd in (1, 2):
        row = ledger.fold(rnd, 0, release, steps=3, sample_rate=0.05, batch_size=8.0,
                          dim=dim, verification="consistent",
                          accuracy=mech.pac_accuracy(0.01, dim, 8.0))
    acc = ClientAccountant("rdp")
    acc.record(release, 0.05, 6)
    assert row["epsilon"] == pytest.approx(acc.epsilon(1e-5), rel=1e-12)
    blocks = sum(log_capacity_vmf(p, k) for k, p in zip((40.0, 75.0, 120.0), DIMS, strict=True))
    assert row["log_capacity_cumulative"] == pytest.approx(6 * blocks, rel=1e-12)
    assert row["mbp_bound"] == pytest.approx(6 * 2 * (40.0 + 75.0 + 120.0))
    assert 0.0 < row["pac_accuracy"] <= 2 * math.sqrt(sum(s * s for s in mech.block_scales))
    tight = PrivacyLedger(1e-5, "tightest").fold(1, 0, release, steps=6, sample_rate=0.05,
                                                  batch_size=8.0, dim=dim)
    assert tight["route"] == "pld" and tight["epsilon"] < row["epsilon"]


def test_config_table_builds_the_per_layer_mechanism():
    from fedpriv.config import config_from_dict

    cfg = config_from_dict({"mechanism": {"name": "vmf", "kappa": 75.0, "vmf_layers":
                                          "per-layer", "vmf_layer_dims": "150,750,12800",
                                          "clip_per_layer": [0.5, 0.5, 1.0]}})
    name, params = cfg.mechanism.for_client(0)
    mech = build_mechanism(name, params)
    assert mech.per_layer and mech.vmf_layer_dims == tuple(DIMS)
    assert build_mechanism(name, mech.params()) == mech
    with pytest.raises(InputError) as err:
        config_from_dict({"mechanism": {"name": "vmf", "vmf_layers": "per-layer"}})
    assert err.value.key == "mechanism.vmf_layer_dims"


def test_account_command_takes_layer_dims():
    from fedpriv.commands.account import account

    common = {"sample_rate": 0.01, "steps": 100, "delta": 1e-5, "route": "rdp",
              "accountant": "rdp"}
    out = account("vmf", kappa=20.0, layer_dims="150,750,12800", **common)
    acc = ClientAccountant("rdp", route="rdp")
    acc.record(VMFLayersRelease((20.0,) * 3, tuple(DIMS)), 0.01, 100)
    assert out["epsilon"] == pytest.approx(acc.epsilon(1e-5), rel=1e-12)
    assert (out["dim"], out["layer_dims"]) == (sum(DIMS), "150,750,12800")
    whole = account("vmf", kappa=20.0, dim=sum(DIMS), **common)
    assert whole["epsilon"] < out["epsilon"]  # Prop. 3
    cal = account("vmf", target_epsilon=out["epsilon"], layer_dims="150,750,12800", **common)
    assert cal["epsilon"] <= out["epsilon"] * (1 + 1e-9)
    assert cal["kappa"] == pytest.approx(20.0, rel=0.02)
    for bad, key in [({"layer_dims": "150,1"}, "--layer-dims"),
                     ({"layer_dims": "150,x"}, "--layer-dims"),
                     ({"layer_dims": "150,750", "dim": 10}, "--dim")]:
        with pytest.raises(InputError) as err:
            account("vmf", kappa=20.0, **{**common, **bad})
        assert err.value.key == key
    with pytest.raises(InputError) as err:
        account("gaussian", noise_multiplier=1.0, layer_dims="150,750", **common)
    assert err.value.key == "--layer-dims"
