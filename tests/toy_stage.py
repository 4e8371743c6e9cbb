"""A verification test added the way a contributor adds one: this single file, plus one entry
in :data:`strategies.stages.STAGES` (tests/test_stage_extension.py inserts it); nothing else
edited — not the properties (its verdict says the property it speaks to), not the pipeline.

``toy-step-size``: a declared SGD-like reply's largest coordinate ``max_i |Δ_i|`` must not
exceed ``LIMIT × lr × steps`` — a toy claim about the training settings (a real test would
derive its bound from the declaration), which makes it easy to fail on purpose.
"""

from __future__ import annotations

import numpy as np

from fedpriv.verification import Verdict, with_preconditions
from strategies.stages.base import Reply, Round, declared

__all__ = ["LIMIT", "step_size"]

LIMIT = 1e6
"""The toy's bound on ``max_i |Δ_i| / (lr·steps)`` (the test lowers it to fail replies)."""


def step_size(batch: list[Reply], rnd: Round) -> None:
    """The stage: one check per declared reply, a precondition of its verdict (it can refute
    the round, never verify it), speaking to ``settings``."""
    for reply in declared(batch):
        assert reply.report is not None and reply.flat is not None and reply.verdict is not None
        bound = LIMIT * reply.report.lr * reply.report.local_steps
        top = float(np.max(np.abs(reply.flat)))
        ok = top <= bound
        check = Verdict("toy-step-size", "consistent" if ok else "inconsistent",
                        f"max |Δ_i| = {top:.3g} {'≤' if ok else '>'} {bound:.3g}",
                        p_value=1.0 if ok else 0.0, speaks_to=("settings",))
        reply.verdict = with_preconditions(reply.verdict, [check])
