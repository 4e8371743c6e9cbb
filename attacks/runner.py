"""Run many attacks, in this process or as Ray tasks, with a progress bar on stderr.

Each attack uses one torch thread (:func:`attacks.registry.run_attack`); parallelism comes
from running attacks side by side as Ray remote tasks of ``num_cpus=1``. An initialised Ray
(e.g. the Flower simulation's) is reused; otherwise Ray is started with the caller's
``num_cpus`` and shut down again when the batch is done.
"""

from __future__ import annotations

import dataclasses
import sys
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


def _run_inline(jobs: Sequence[AttackJob], bar: tqdm) -> list[AttackResult]:
    results = []
    for job in jobs:
        results.append(job.run())
        bar.update(1)
    return results


def _run_ray(jobs: Sequence[AttackJob], num_cpus: int | None, bar: tqdm) -> list[AttackResult]:
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=num_cpus, include_dashboard=False)
    try:
        task = ray.remote(num_cpus=1)(_run_job)
        refs = [task.remote(job) for job in jobs]
        position = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(jobs)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            results[position[done[0]]] = ray.get(done[0])
            bar.update(1)
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
) -> list[AttackResult]:
    """Run ``jobs`` and return their results in job order.

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

    Raises
    ------
    InputError
        Bad executor (``attack.executor``), ``num_cpus`` or job setting.
    """
    if executor not in EXECUTORS:
        raise InputError("attack.executor", executor, f"one of {list(EXECUTORS)}")
    if num_cpus is not None and not (isinstance(num_cpus, int) and num_cpus >= 1):
        raise InputError("attack.num_cpus", num_cpus, "an integer >= 1 or None")
    for job in jobs:
        job.check()
    with tqdm(total=len(jobs), desc="attacks", file=sys.stderr, disable=not progress) as bar:
        if executor == "ray":
            return _run_ray(jobs, num_cpus, bar)
        return _run_inline(jobs, bar)
