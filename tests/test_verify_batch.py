"""The verification stage verifies replies that share a declaration together
(``strategies/stages/verify.py``: ``recovered_together``, ``verified_together``,
``Mechanism.verify_many``); every reply's recovered update, observation and verdict must be
what the per-reply functions give it alone, on a batch that mixes declarations, mechanisms,
cheats, an undeclared reply, a replay, a diverged update and a declaration the tests cannot
evaluate."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from verification_support import simulate_round

from fedpriv.protocol import ClientReport
from fedpriv.verification import Verdict
from fedpriv.verification.replay import UpdateSketches
from fedpriv.verification.update import BLOCK
from strategies.replies import AcceptedReply
from strategies.reply_verdicts import observe_reply, recovered_reply, verified_or_inconsistent
from strategies.stages.base import Reply, Round
from strategies.stages.verify import verify

DIM, ALPHA, REPLAYER = 3_000, 1e-6, 900
F32 = np.float32

# (mechanism, simulate_round's keywords): a group of honest Gaussian replies larger than a block,
# cheats under the same declaration, other declarations and every other mechanism
KINDS = (
    [("gaussian", {})] * (2 * BLOCK + 3)
    + [("gaussian", {"update_factor": 3.0}), ("gaussian", {"actual": {"noise_multiplier": 0.3}}),
       ("gaussian", {"released": "clip"}), ("gaussian", {"lr": 0.05}),
       ("gaussian", {"noise_multiplier": 0.0}), ("gaussian", {"sampling": "fixed"})]
    + [("laplace", {})] * 3 + [("vmf", {})] * 2 + [("clip", {})] * 2 + [("none", {})] * 2
)


def _report(mechanism: str, seed: int, **kwargs: object) -> tuple[ClientReport, np.ndarray]:
    """A reply's report and its update Δ (float32), simulated with batch 16 of 60 records."""
    claim, theta, client = simulate_round(mechanism, np.random.default_rng(seed), dim=DIM,
                                          local_size=60, batch_size=16, **kwargs)
    d = claim.declaration
    report = ClientReport(partition_id=seed, server_round=2, local_examples=d.local_size,
                          local_steps=d.steps, lr=d.lr, batch_size=d.batch_size,
                          sampling=d.sampling, sample_rate=d.sample_rate,
                          mechanism=claim.built())
    return report, (client - theta).astype(F32)


def _batch(theta: np.ndarray) -> list[Reply]:
    """The mixed batch, built afresh (the stage writes on its replies)."""
    updates = [(*_report(name, seed, **kwargs), seed) for seed, (name, kwargs) in
               enumerate(KINDS)]
    diverged = updates[3][1].copy()
    diverged[7] = np.nan
    hostile = dataclasses.replace(updates[4][0], lr=1e-300)  # Δ/η overflows: untestable
    updates += [(updates[0][0], diverged, 800), (None, updates[1][1], 801),
                (updates[2][0], updates[2][1], REPLAYER), (hostile, updates[4][1], 802),
                (hostile, updates[5][1], 803)]
    replies = []
    for node, (report, delta, cid) in enumerate(updates):
        arrays = [(theta + delta).astype(F32)]
        accepted = AcceptedReply(node, cid, report, arrays, 1.0, None)  # type: ignore[arg-type]
        flat = (arrays[0] - theta).astype(F32) if report is not None else None
        replies.append(Reply(node, None, accepted=accepted, dim=DIM, flat=flat))  # type: ignore[arg-type]
    return replies


def _sketches(replies: list[Reply]) -> UpdateSketches:
    """Sketches that remember the replayer's update from round 1."""
    sketches = UpdateSketches(DIM, seed=5)
    replayer = next(r for r in replies if r.accepted.client_id == REPLAYER)  # type: ignore[union-attr]
    sketches.add(1, REPLAYER, replayer.flat.copy())  # type: ignore[union-attr]
    return sketches


def _alone(reply: Reply, rnd: Round, sketches: UpdateSketches) -> tuple[Verdict, object, object]:
    """The reply's verdict, recovered update and observation by the per-reply functions."""
    report, arrays = reply.report, reply.accepted.arrays  # type: ignore[union-attr]
    if report is None:
        return Verdict("declaration", "undeclared", "x"), None, None
    if sketches.replay_of(reply.client_id, reply.flat) is not None:  # type: ignore[arg-type]
        return Verdict("replay", "inconsistent", "x"), None, None
    recovered = recovered_reply(report, rnd.theta[0], arrays)
    verdict = verified_or_inconsistent(report, rnd.theta[0], arrays, ALPHA, recovered)
    return verdict, recovered, observe_reply(report, recovered)


def _same_update(a: object, b: object) -> bool:
    if isinstance(a, Verdict) or a is None:
        return repr(a) == repr(b)
    return (np.array_equal(a.summed, b.summed)  # type: ignore[attr-defined]
            and repr({**a.__dict__, "summed": 0}) == repr({**b.__dict__, "summed": 0}))


@pytest.fixture(scope="module")
def theta() -> np.ndarray:
    return (F32(0.1) * np.random.default_rng(99).standard_normal(DIM, dtype=F32)).astype(F32)


def test_batched_verdicts_are_the_per_reply_ones(theta: np.ndarray) -> None:
    batch = _batch(theta)
    run = SimpleNamespace(audit=SimpleNamespace(verify_alpha=ALPHA), sketches=_sketches(batch))
    run.sketches_of = lambda dim: run.sketches
    rnd = Round(2, [theta], None, run)  # type: ignore[arg-type]
    verify(batch, rnd)
    reference = _sketches(_batch(theta))
    statuses = set()
    for reply in batch:
        verdict, recovered, observation = _alone(reply, rnd, reference)
        assert reply.verdict is not None
        statuses.add((reply.verdict.test, reply.verdict.status))
        if reply.verdict.test in ("declaration", "replay"):
            assert (reply.verdict.test, reply.verdict.status) == (verdict.test, verdict.status)
            continue
        assert repr(reply.verdict) == repr(verdict), reply.client_id
        assert _same_update(reply.recovered, recovered), reply.client_id
        assert repr(reply.observation) == repr(observation), reply.client_id
    # the batch holds what it is meant to: passes, refutations, the unverifiable and the rest
    assert {("client-round", "consistent"), ("client-round", "inconsistent"),
            ("client-round", "unverifiable"), ("declaration", "undeclared"),
            ("replay", "inconsistent")} <= statuses


def test_the_sketch_is_the_count_sketch_of_before_bit_for_bit() -> None:
    """``R·Δ`` as a sparse product sums each bucket's rounded products in coordinate order,
    from 0 — what ``np.bincount`` of the products did: the sketches the store keeps (and
    ``--resume`` compares with) are unchanged."""
    seed, rng = 3, np.random.default_rng(8)
    sketches = UpdateSketches(DIM, seed)
    draw = np.random.default_rng([seed, 0x5E7C])  # the buckets and signs, drawn as the class does
    bucket = draw.permutation(DIM) % sketches.width
    sizes = np.bincount(bucket, minlength=sketches.width).astype(np.float64)
    weight = draw.choice(np.array([-1.0, 1.0]), size=DIM) / np.sqrt(sizes)[bucket]
    for scale in (1e-3, 1.0, 1e6):
        update = (scale * rng.standard_normal(DIM)).astype(F32)
        before = np.bincount(bucket, weights=weight * update.astype(np.float64),
                             minlength=sketches.width)
        assert sketches.sketch(update).tobytes() == before.tobytes()
