"""The committed noise re-drawn exactly (fedpriv/verification/committed.py): the server's
re-draw equals what fedpriv's own local training drew — batches and noise, Gaussian, Laplace
and client level — and the check refutes any deviation beyond its rounding bound, and only
those (deterministic: no false alarm on honest releases)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedpriv.gradients import gradient_source
from fedpriv.mechanisms import build_mechanism
from fedpriv.models import build_model
from fedpriv.seeding import make_generator, update_generator
from fedpriv.training import local_train
from fedpriv.verification.committed import Redrawn, committed_test
from strategies.committed_redraw import redraw

SHAPE, N, L, SEED, CLIENT, ROUND = (1, 16, 16), 200, 16, 7, 3, 2


def _data() -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(N, *SHAPE, generator=g), torch.randint(0, 10, (N,), generator=g)
    ids = np.arange(1000, 1000 + N) * 3  # record ids of the partition, in its order
    return x, y, ids


def _one_step(name: str, params: dict, sampling: str = "poisson") -> dict:
    """One step of fedpriv's local training from the seeded stream, and the server's view."""
    torch.manual_seed(1)
    model = build_model("paper-mlp", SHAPE)
    theta = [p.detach().clone() for p in model.parameters()]
    x, y, ids = _data()
    mechanism = build_mechanism(name, params)
    result = local_train(model, x, y, mechanism, lr=0.5, local_steps=1, batch_size=L,
                         sampling=sampling, generator=make_generator(SEED, CLIENT, ROUND),
                         record_ids=ids.tolist(), keep_releases=True)
    release = result.releases[0].double().numpy()
    fresh = build_model("paper-mlp", SHAPE).double()  # the clipped sum at θ, in float64
    torch.nn.utils.vector_to_parameters(torch.cat([t.reshape(-1) for t in theta]).double(),
                                        list(fresh.parameters()))
    rows = [int(np.flatnonzero(ids == i)[0]) for i in result.batch_indices[0]]
    source = gradient_source(fresh, x[rows].double(), y[rows])
    signal = source.clipped_sum(mechanism.clip_bounds, mechanism.norm_ord).numpy() / L
    redrawn = redraw(mechanism, seed=SEED, client_id=CLIENT, server_round=ROUND,
                     local_size=N, batch_size=float(L), sampling=sampling, steps=1,
                     shapes=[tuple(t.shape) for t in theta], dtype=np.dtype("float32"),
                     divisor=float(L))
    slack = 1e-4 * max(len(rows), 1) * mechanism.sensitivity / L  # the replay's own allowance
    return {"release": release, "signal": signal, "redrawn": redrawn, "ids": ids,
            "batches": result.batch_indices, "slack": slack, "mechanism": mechanism}


def _check(case: dict, release: np.ndarray, batches=None, scale: float = 1.0):  # noqa: ANN001
    return committed_test([(release - case["signal"], case["slack"])], [release],
                          case["redrawn"], case["ids"],
                          case["batches"] if batches is None else batches, scale)


@pytest.mark.parametrize(("name", "params", "sampling"), [
    ("gaussian", {"noise_multiplier": 2.0}, "poisson"),
    ("gaussian", {"noise_multiplier": 0.5, "clip": 0.3}, "fixed"),
    ("laplace", {"laplace_scale": 0.5}, "poisson"),
])
def test_the_redraw_is_what_local_training_drew(name: str, params: dict, sampling: str) -> None:
    case = _one_step(name, params, sampling)
    positions = case["redrawn"].batches[0]
    assert case["ids"][positions].tolist() == case["batches"][0]
    # the release less the independently recomputed clipped signal is the re-drawn noise, to
    # float32 rounding (noise std per coordinate is ≥ 0.3·0.5/16 ≈ 0.01)
    remainder = case["release"] - case["signal"] - case["redrawn"].noises[0]
    assert np.linalg.norm(remainder) < 1e-5
    honest = _check(case, case["release"])
    assert honest.status == "consistent", honest.reason
    assert honest.alpha is None and honest.speaks_to == ("sensitivity",)


def test_any_deviation_beyond_the_rounding_bound_is_refuted() -> None:
    case = _one_step("gaussian", {"noise_multiplier": 2.0})
    release, signal = case["release"], case["signal"]
    s = 2.0 / L
    bound = _check(case, release, scale=s).statistic["bound_in_noise"] * s
    direction = signal / np.linalg.norm(signal)
    assert _check(case, release + 0.5 * bound * direction).status == "consistent"
    for cheat in (release + 2.0 * bound * direction,  # just beyond the bound
                  release + 0.001 * signal,  # the clipped signal × 1.001
                  release + np.roll(case["redrawn"].noises[0], 1) - case["redrawn"].noises[0]):
        verdict = _check(case, cheat)
        assert verdict.status == "inconsistent" and verdict.p_value == 0.0, verdict.reason
    other = [list(b) for b in case["batches"]]
    other[0] = other[0][1:] + other[0][:1] if len(other[0]) > 1 else [int(case["ids"][0])]
    wrong = _check(case, release, batches=other)  # the same records in another order
    assert wrong.status == "inconsistent" and "oracle's records" in wrong.reason
    batch = case["batches"][0]
    assert batch, "the seeded stream sampled an empty batch"
    outside = next(int(i) for i in case["ids"] if int(i) not in batch)  # of the partition
    for swapped in (outside, int(case["ids"].max()) + 3):  # and a record not in it at all
        other = [list(b) for b in case["batches"]]
        other[0][len(batch) // 2] = swapped
        wrong = _check(case, release, batches=other)
        assert wrong.status == "inconsistent" and "oracle's records" in wrong.reason


def test_the_client_level_update_noise_is_redrawn() -> None:
    """The release as the ClientApp makes it (:func:`clients.client_dp.privatize_arrays` on
    its received and trained ArrayRecords, the generator it passes) less θ + Δ is the
    server's re-draw: drawing both sides with the mechanism's own calls could not see the
    client's path drift from the server's."""
    from flwr.app import Array, ArrayRecord

    from clients.client_dp import privatize_arrays

    mechanism = build_mechanism("client-gaussian", {"noise_multiplier": 1.0, "clip": 1.0})
    shapes = [(4, 3), (3,)]
    rng = np.random.default_rng(0)
    theta = [rng.standard_normal(s).astype(np.float32) for s in shapes]  # as a model's
    trained = [t + np.float32(0.1) for t in theta]  # ‖Δ‖ ≈ 0.1·√15 < S: not clipped
    released = privatize_arrays(
        mechanism, ArrayRecord({f"p{i}": Array(t) for i, t in enumerate(theta)}),
        ArrayRecord({f"p{i}": Array(t) for i, t in enumerate(trained)}),
        update_generator(SEED, CLIENT, ROUND)).to_numpy_ndarrays()
    assert all(r.dtype == np.float32 for r in released)
    redrawn = redraw(mechanism, seed=SEED, client_id=CLIENT, server_round=ROUND,
                     local_size=N, batch_size=float(L), sampling="poisson", steps=2,
                     shapes=shapes, dtype=np.dtype("float32"), divisor=1.0)
    assert len(redrawn.batches) == 2 and len(redrawn.noises) == 1
    # θ + Δ + n rounded to float32, less θ + Δ: the noise to float32 rounding (|·| < 2 here)
    flat = np.concatenate([(r.astype(np.float64) - t).reshape(-1)
                           for r, t in zip(released, trained, strict=True)])
    np.testing.assert_allclose(flat, redrawn.noises[0], rtol=0, atol=1e-6)
    assert isinstance(redrawn, Redrawn)
