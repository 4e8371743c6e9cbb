"""Run many attacks, in this process or as Ray tasks, with a progress bar on stderr.

Each attack uses one torch thread (:func:`attacks.registry.run_attack`); parallelism comes
from running attacks side by side as Ray remote tasks of ``num_cpus=1``. An initialised Ray
(e.g. the Flower simulation's) is reused; otherwise Ray is started with the caller's
``num_cpus`` and shut down again when the batch is done.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from attacks.registry import check_attack, run_attack
from attacks.result import AttackResult
from attacks.view import ServerView
from fedpriv.errors import InputError

__all__ = ["EXECUTORS", "AttackJob", "run_attacks"]

EXECUTORS = ("inline", "ray")


@dataclass(frozen=True, eq=False)
class AttackJob:
    """One attack to run: the arguments of :func:`attacks.registry.run_attack`."""

    name: str
    view: ServerView
    iterations: int
    restarts: int = 1
    seed: int = 0
    num_images: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    tuning: Mapping[str, Any] | None = None  # how ``options`` were chosen, kept with the result

    def check(self) -> None:
        """Raise :class:`InputError` for a bad setting, before any attack runs."""
        check_attack(
            self.name,
            self.iterations,
            self.restarts,
            self.seed,
            self.num_images,
            dict(self.options),
        )

    def run(self) -> AttackResult:
        """Run the attack in this process; the result's settings carry :attr:`tuning`."""
        result = run_attack(
            self.name,
            self.view,
            iterations=self.iterations,
            restarts=self.restarts,
            seed=self.seed,
            num_images=self.num_images,
            device=self.device,
            **self.options,
        )
        if self.tuning is None:
            return result
        return dataclasses.replace(result, settings={**result.settings,
                                                     "tuning": dict(self.tuning)})


def _run_job(job: AttackJob) -> AttackResult:
    return job.run()


def _run_inline(jobs: Sequence[AttackJob], bar: tqdm, deadline: float | None, first: int
                ) -> list[AttackResult | None]:
    results: list[AttackResult | None] = []
    for i, job in enumerate(jobs):
        if i >= first and deadline is not None and time.monotonic() >= deadline:
            return results + [None] * (len(jobs) - i)
        results.append(job.run())
        bar.update(1)
    return results


def _gather(refs: list[Any], results: list[Any], at: dict[Any, int], bar: tqdm,
            deadline: float | None) -> None:
    """Fill ``results`` as ``refs`` finish; once ``deadline`` passes, cancel what is left."""
    import ray

    pending = list(refs)
    try:
        while pending:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = ray.wait(pending, num_returns=1, timeout=wait)
            if not done:  # the deadline passed: what is unfinished is not run
                break
            results[at[done[0]]] = ray.get(done[0])
            bar.update(1)
    finally:  # also on Ctrl-C: no attack of ours runs on in a Ray it did not start
        for ref in pending:
            ray.cancel(ref, force=True)


def _run_ray(jobs: Sequence[AttackJob], num_cpus: int | None, bar: tqdm,
             deadline: float | None, first: int) -> list[AttackResult | None]:
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=num_cpus, include_dashboard=False)
    try:
        task = ray.remote(num_cpus=1)(_run_job)
        results: list[Any] = [None] * len(jobs)
        lead = len(jobs) if deadline is None else first
        refs = [task.remote(job) for job in jobs[:lead]]
        _gather(refs, results, {ref: i for i, ref in enumerate(refs)}, bar, None)
        if lead < len(jobs) and time.monotonic() < deadline:  # type: ignore[operator]
            refs = [task.remote(job) for job in jobs[lead:]]
            _gather(refs, results, {ref: lead + i for i, ref in enumerate(refs)}, bar, deadline)
        return results
    finally:
        if started:
            ray.shutdown()


def run_attacks(
    jobs: Sequence[AttackJob],
    *,
    executor: str = "inline",
    num_cpus: int | None = None,
    progress: bool = True,
    seconds: float | None = None,
    first: int = 1,
) -> list[AttackResult | None]:
    """Run ``jobs`` and return their results in job order; None for a job the time limit
    ``seconds`` left unrun.

    Parameters
    ----------
    jobs
        The attacks; every one is checked before any runs.
    executor
        ``"inline"`` (sequentially, in this process) or ``"ray"`` (remote tasks, 1 CPU each).
    num_cpus
        CPUs for ``ray.init`` when no Ray is running (None lets Ray detect them).
    progress
        Show a tqdm bar on stderr counting finished attacks.
    seconds
        The batch's time limit (None: none). The ``first`` jobs always run, to the end; of the
        rest none starts once this many seconds have passed (inline), or those unfinished by
        then are cancelled (Ray: they are sent once the first have finished, if time is left).
    first
        The leading jobs the time limit does not apply to (a plan's first client's attacks).

    Raises
    ------
    InputError
        Bad executor (``attack.executor``), ``num_cpus`` or job setting.
    """
    if executor not in EXECUTORS:
        raise InputError("attack.executor", executor, f"one of {list(EXECUTORS)}")
    if num_cpus is not None and not (isinstance(num_cpus, int) and num_cpus >= 1):
        raise InputError("attack.num_cpus", num_cpus, "an integer >= 1 or None")
    if seconds is not None and (isinstance(seconds, bool) or not (
            isinstance(seconds, int | float) and 0 < seconds < math.inf)):
        raise InputError("attack.seconds", seconds, "a finite number of seconds > 0 or None")
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise InputError("attack.first", first, "an integer >= 0")
    for job in jobs:
        job.check()
    deadline = None if seconds is None else time.monotonic() + seconds
    with tqdm(total=len(jobs), desc="attacks", file=sys.stderr, disable=not progress) as bar:
        if executor == "ray":
            return _run_ray(jobs, num_cpus, bar, deadline, first)
        return _run_inline(jobs, bar, deadline, first)
