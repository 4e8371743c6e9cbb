"""The attack runner: inline and Ray give the same results for the same seeds."""

from __future__ import annotations

import numpy as np
import pytest
from attacks_support import digits, mean_gradient_view

from attacks import AttackJob, run_attack, run_attacks
from fedpriv.errors import InputError


def _jobs() -> list[AttackJob]:
    x, y = digits([0, 1])
    view = mean_gradient_view(x, y)
    return [
        AttackJob("iga", view, iterations=5, seed=0, options={"tv_weight": 1e-4}),
        AttackJob("dlg", view, iterations=5, seed=1),
        AttackJob("idlg", view, iterations=5, restarts=2, seed=2, num_images=1),
    ]


def _same(a, b) -> None:
    assert a.attack == b.attack and a.loss == b.loss
    np.testing.assert_array_equal(a.reconstructions, b.reconstructions)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.start, b.start)


def test_inline_matches_direct_calls_in_job_order(capsys):
    jobs = _jobs()
    results = run_attacks(jobs, executor="inline")
    for job, result in zip(jobs, results, strict=True):
        _same(
            result,
            run_attack(
                job.name,
                job.view,
                iterations=job.iterations,
                restarts=job.restarts,
                seed=job.seed,
                num_images=job.num_images,
                **job.options,
            ),
        )
    err = capsys.readouterr().err
    assert "3/3" in err  # the tqdm bar counts finished attacks on stderr


def test_bad_jobs_are_rejected_before_any_runs():
    jobs = _jobs()
    jobs.append(AttackJob("nope", jobs[0].view, iterations=1))
    with pytest.raises(InputError) as err:
        run_attacks(jobs, progress=False)
    assert err.value.key == "attack.name"
    with pytest.raises(InputError) as err:
        run_attacks(_jobs(), executor="dask")
    assert err.value.key == "attack.executor"


@pytest.mark.slow
def test_ray_matches_inline():
    ray = pytest.importorskip("ray")
    jobs = _jobs()
    inline = run_attacks(jobs, executor="inline", progress=False)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        remote = run_attacks(jobs, executor="ray", progress=False)
        assert ray.is_initialized()  # an existing Ray is reused, not shut down
    finally:
        ray.shutdown()
    own = run_attacks(jobs[:1], executor="ray", num_cpus=1, progress=False)
    assert not ray.is_initialized()  # a Ray the runner started is shut down again
    for a, b in zip(inline, remote, strict=True):
        _same(a, b)
    _same(inline[0], own[0])
