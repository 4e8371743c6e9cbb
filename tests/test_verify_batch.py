"""The verification stage verifies replies that share a declaration together
(``strategies/stages/verify.py``: ``recovered_together``, ``verified_together``,
``Mechanism.verify_many``); every reply's recovered update, observation and verdict must be
what the per-reply functions give it alone, on a batch that mixes declarations, mechanisms,
cheats, an undeclared reply, a replay, a diverged update, a declaration the tests cannot
evaluate, an update whose second moment underflows when squared, a steps-mode reply and every
registered mechanism (client-gaussian's observation included: a subclass's ``observe`` is never
bypassed by an inherited ``observe_many``)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from verification_support import simulate_round

from fedpriv.mechanisms import mechanism_names
from fedpriv.protocol import ClientReport
from fedpriv.verification import Verdict
from fedpriv.verification.replay import UpdateSketches
from fedpriv.verification.update import BLOCK
from strategies.replies import UNDECLARED, AcceptedReply
from strategies.reply_verdicts import observe_reply, recovered_reply, verified_or_inconsistent
from strategies.stages.base import Reply, Round
from strategies.stages.verify import verify
from strategies.step_releases import verify_step_reply

DIM, ALPHA, REPLAYER, TINY, STEPS, RAISING = 3_000, 1e-6, 900, 804, 805, 806
HUGE, SHORT = 807, 808  # an honest group's hostile members: its check, its recovery raises
F32 = np.float32

# (mechanism, simulate_round's keywords): a group of honest Gaussian replies larger than a block,
# cheats under the same declaration, other declarations and every other mechanism
KINDS = (
    [("gaussian", {})] * (2 * BLOCK + 3)
    + [("gaussian", {"update_factor": 3.0}), ("gaussian", {"actual": {"noise_multiplier": 0.3}}),
       ("gaussian", {"released": "clip"}), ("gaussian", {"lr": 0.05}),
       ("gaussian", {"noise_multiplier": 0.0}), ("gaussian", {"sampling": "fixed"})]
    + [("laplace", {})] * 3 + [("vmf", {})] * 2 + [("clip", {})] * 2 + [("none", {})] * 2
    + [("client-gaussian", {})] * 2
)


class _Raising(ClientReport):
    """A report whose declaration raises (what a hostile report's fields could make it do)."""

    def declaration(self):  # noqa: ANN201
        raise RuntimeError("hostile")


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
                (hostile, updates[5][1], 803), (updates[6][0], updates[6][1], STEPS),
                (_Raising(**vars(updates[7][0])), updates[7][1], RAISING)]
    replies = []
    for node, (report, delta, cid) in enumerate(updates):
        arrays = [(theta + delta).astype(F32)]
        releases = ((theta - arrays[0]) / F32(report.lr))[None] if cid == STEPS else None
        accepted = AcceptedReply(node, cid, report, arrays, 1.0, None, releases)  # type: ignore[arg-type]
        flat = (arrays[0] - theta).astype(F32) if report is not None else None
        replies.append(Reply(node, None, accepted=accepted, dim=DIM, flat=flat))  # type: ignore[arg-type]
    # Δ = 10⁻⁸⁵ at θ's zero coordinate (float64 parameters): m₂ ≈ 3·10⁻¹⁷⁴ squares to 0
    tiny = [theta.astype(np.float64)]
    tiny[0][0] = 1e-85
    accepted = AcceptedReply(len(replies), TINY, updates[0][0], tiny, 1.0, None)  # type: ignore[arg-type]
    replies.append(Reply(len(replies), None, accepted=accepted, dim=DIM,  # type: ignore[arg-type]
                         flat=np.zeros(DIM, F32)))
    # in the honest group: ‖u‖₂ overflows (verify_gaussian raises), too few parameters
    # (recovery raises)
    for cid, arrays in ((HUGE, [np.full(DIM, 1e200)]), (SHORT, [theta[:10]])):
        accepted = AcceptedReply(len(replies), cid, updates[0][0], arrays, 1.0, None)  # type: ignore[arg-type]
        replies.append(Reply(len(replies), None, accepted=accepted, dim=DIM,  # type: ignore[arg-type]
                             flat=np.zeros(DIM, F32)))
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
        return Verdict("declaration", "undeclared", UNDECLARED), None, None
    replayed = sketches.replay_of(reply.client_id, reply.flat)  # type: ignore[arg-type]
    if replayed is not None:
        return Verdict("replay", "inconsistent", "the update repeats this client's update of "
                       f"round {replayed}", p_value=0.0, speaks_to=("fresh-noise",)), None, None
    recovered = recovered_reply(report, rnd.theta[0], arrays)
    releases = reply.accepted.releases  # type: ignore[union-attr]
    verdict = (verified_or_inconsistent(report, rnd.theta[0], arrays, ALPHA, recovered)
               if releases is None else
               verify_step_reply(report, rnd.broadcast, arrays, releases, ALPHA, reply.share))
    return verdict, recovered, observe_reply(report, recovered)


def _same_update(a: object, b: object) -> bool:
    if isinstance(a, Verdict) or a is None:
        return repr(a) == repr(b)
    return (np.array_equal(a.summed, b.summed)  # type: ignore[attr-defined]
            and repr({**a.__dict__, "summed": 0}) == repr({**b.__dict__, "summed": 0}))


@pytest.fixture(scope="module")
def theta() -> np.ndarray:
    """θ, float32, with a zero first coordinate (where the underflowing update lives)."""
    theta = (F32(0.1) * np.random.default_rng(99).standard_normal(DIM, dtype=F32)).astype(F32)
    theta[0] = 0.0
    return theta


def _verified(theta: np.ndarray) -> tuple[list[Reply], Round]:
    """The mixed batch through the verification stage, and its round."""
    batch = _batch(theta)
    run = SimpleNamespace(audit=SimpleNamespace(verify_alpha=ALPHA), sketches=_sketches(batch))
    run.sketches_of = lambda dim: run.sketches
    rnd = Round(2, [theta], None, run)  # type: ignore[arg-type]
    verify(batch, rnd)
    return batch, rnd


@pytest.mark.filterwarnings("ignore:overflow encountered in dot:RuntimeWarning")  # HUGE's ‖u‖²
def test_batched_verdicts_are_the_per_reply_ones(theta: np.ndarray) -> None:
    batch, rnd = _verified(theta)
    reference = _sketches(_batch(theta))
    statuses, mechanisms = set(), set()
    for reply in batch:
        verdict, recovered, observation = _alone(reply, rnd, reference)
        assert reply.verdict is not None
        statuses.add((reply.verdict.test, reply.verdict.status))
        assert repr(reply.verdict) == repr(verdict), reply.client_id
        if verdict.test in ("declaration", "replay"):
            continue
        mechanisms.add(reply.report.mechanism.name)  # type: ignore[union-attr]
        assert _same_update(reply.recovered, recovered), reply.client_id
        assert repr(reply.observation) == repr(observation), reply.client_id
    # the batch holds what it is meant to: passes, refutations, the unverifiable and the rest
    assert {("client-round", "consistent"), ("client-round", "inconsistent"),
            ("client-round", "unverifiable"), ("declaration", "undeclared"),
            ("replay", "inconsistent"), ("declaration", "inconsistent")} <= statuses
    assert mechanisms == set(mechanism_names())
    tiny = next(r for r in batch if r.client_id == TINY).verdict
    steps = next(r for r in batch if r.client_id == STEPS).verdict
    assert tiny is not None and "gaussian-norm" in tiny.reason and "is too small" in tiny.reason
    assert steps is not None and {p.test for p in steps.parts} >= {"composition", "steps"}
    for cid in (HUGE, SHORT, RAISING):
        verdict = next(r for r in batch if r.client_id == cid).verdict
        assert verdict is not None and "cannot be tested" in verdict.reason, cid


def test_a_hostile_reply_leaves_its_group_verified_together(
    theta: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply whose recovery or check raises gets its own verdict inside the batch: its group
    never falls back to recovering and verifying every reply alone (only the report whose
    declaration raises, a group of its own, is)."""
    import strategies.reply_verdicts as verdicts

    calls: list[str] = []
    for name in ("recovered_reply", "verified_or_inconsistent"):
        original = getattr(verdicts, name)
        monkeypatch.setattr(verdicts, name, lambda *a, f=original, n=name: (calls.append(n),
                                                                            f(*a))[1])
    _verified(theta)
    assert sorted(calls) == ["recovered_reply", "verified_or_inconsistent"]


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


def test_replays_are_found_whatever_the_blocking(monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`UpdateSketches.replays_of` compares a bounded block of clients' earlier sketches
    at a time: any block size finds each client's first repeated round, and only that."""
    import fedpriv.verification.replay as replay

    rng = np.random.default_rng(4)
    sketches = UpdateSketches(DIM, seed=5)
    earlier = {(rnd, cid): rng.standard_normal(DIM).astype(F32)
               for rnd in (1, 2, 3) for cid in range(6)}
    for (rnd, cid), update in earlier.items():
        sketches.add(rnd, cid, update)
    clients = [0, 1, 2, 3, 4, 5, 9]
    updates = [earlier[2, 0], rng.standard_normal(DIM).astype(F32), earlier[1, 2],
               earlier[3, 3], earlier[3, 0], rng.standard_normal(DIM).astype(F32),
               earlier[1, 1]]
    expected = [2, None, 1, 3, None, None, None]
    for block in (1, 2, 3, 5, replay._COMPARED):
        monkeypatch.setattr(replay, "_COMPARED", block)
        assert sketches.replays_of(clients, updates) == expected, block
