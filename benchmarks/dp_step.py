"""The cost of privacy in one training step: the paper MLP at batch 128 (the paper study) and
batch 16 (the scaling workload), 16×16 digits, CPU.

``python -m benchmarks.dp_step [--quick | --smoke | --paired-only]`` (from the repository root)
prints one JSON object:

* ``steps_ms`` (batch 128) and ``batch_16.steps_ms``: one full step (gradients, clip/noise,
  parameter update) by each route —
  ``plain`` (mean-loss backward, ``torch.optim.SGD``), ``dp_outer``
  (:func:`fedpriv.gradients.linear.linear_per_example_gradients`, then the Gaussian
  mechanism's ``privatize``), ``dp_vmap`` (``torch.func.vmap`` per-example gradients, the route
  of models with non-linear layers), ``dp_loop`` (one backward per example),
  ``dp_ghost`` (clipped sum from :func:`~fedpriv.gradients.clipping.
  ghost_clipped_sum` without materialising the ``(B, p)`` matrix, then the mechanism's noise —
  the route :func:`fedpriv.training.private_release` takes for clipped
  mechanisms on all-linear models), ``dp_local_train`` (the whole production call,
  :func:`fedpriv.training.local_train` for one step of a fixed-size batch of all ``B`` records:
  the batch draw, the release, a fresh optimiser, its step and the bookkeeping) and
  ``dp_opacus`` (Opacus ``GradSampleModule`` hooks + ``DPOptimizer``) and ``dp_opacus_ghost``
  (Opacus's ghost clipping, ``GradSampleModuleFastGradientClipping``: two backward passes),
  both if Opacus is importable (``pip install -e ".[opacus]"``). Every DP route but
  ``dp_local_train`` and the Opacus ones applies its release as ``local_train`` does with its
  default optimiser (the release set as ``p.grad``, then
  :class:`~fedpriv.training.optimizers.PlainSGD`: ``torch.optim.SGD``'s floats in one
  operator), so the update costs every DP route the same; the plain step uses
  ``torch.optim.SGD`` as a user writes it.
* ``ratio_to_plain``: each route's median over ``plain``'s in that round-robin of every route.
* ``paired``: ``plain``, ``dp_ghost``, ``dp_ghost_torch_sgd`` (the same release stepped by
  ``torch.optim.SGD``) and ``dp_local_train`` timed with nothing else, in blocks (fresh models
  each), each route in runs of 10 consecutive steps (``in_runs``, as a
  training loop runs) and switching at every step (``alternating``);
  ``ratio_dp_to_plain``, the headline, is the median over blocks of the production route's
  (``dp_ghost``) ``in_runs`` ratio of medians (aim ≤ 1.40, issue 37: the floor in eager
  PyTorch is the plain step plus the noise draw and the per-example norms, ≈ 1.3 ×).
* ``per_mechanism_ms``: one step per mechanism (none, clip, gaussian, laplace, vmf) by the
  ``vmap``, ``outer`` and (clipped mechanisms) ``ghost`` routes, batch 128.
* ``profile``: at both batches, the production step built up stage by stage (gradient source,
  clipped sum, release, update; each stage's marginal cost measured in place, and the noise
  draw alone) against the plain step's forward + backward and update; torch.profiler's top
  operators of the production step; the minor page faults per step of each route.
* ``malloc_tuned``: ``steps_ms`` and ratios again in a child process whose glibc keeps freed
  memory (``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` = 1 GiB): without it every
  step's fresh ``(B, p)`` buffers (7 MB) are returned to the OS and page-faulted back in.

One torch thread; medians over ``repeats`` timed steps after warm-up steps. ``--smoke`` runs every
part with one or two steps: it checks that the benchmark runs, it measures nothing.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.timing import ratio, timed, timed_in_runs, timed_interleaved

__all__ = ["measure"]

BATCH, LR, AIM = 128, 0.01, 1.40  # the aim of issue 37, item 3: DP ≤ 1.40 × plain at batch 128
PAIRED_BLOCKS, RUN_LENGTH = 5, 10
SMALL_BATCH = 16  # the scaling workload's batch (benchmarks/scaling.py)
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(2**30), "MALLOC_TRIM_THRESHOLD_": str(2**30)}


def _data(batch: int = BATCH) -> tuple[torch.Tensor, torch.Tensor]:
    from fedpriv.data.datasets import scikit_digits

    return scikit_digits(slice(batch))


def _model() -> torch.nn.Module:
    from fedpriv.models.mlp import PaperMLP

    torch.manual_seed(0)
    return PaperMLP()


def loop_per_example_gradients(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The naive route: one forward and backward pass per example."""
    params = list(model.parameters())
    rows, losses = [], []
    for i in range(x.shape[0]):
        loss = F.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]))
        losses.append(loss.detach())
    return torch.stack(rows), torch.stack(losses)


PerExample = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], tuple[Any, Any]]


def _routes() -> dict[str, PerExample]:
    from fedpriv.gradients import vmap_per_example_gradients
    from fedpriv.gradients.linear import linear_per_example_gradients

    return {"vmap": vmap_per_example_gradients, "outer": linear_per_example_gradients,
            "loop": loop_per_example_gradients}


def _sgd_update(model: torch.nn.Module, torch_sgd: bool = False) -> Callable[[torch.Tensor], None]:
    """``θ ← θ − η · release`` as :func:`fedpriv.training.local_train` applies it: the flat
    release becomes each parameter's ``p.grad`` (views) and the default local optimiser steps
    (:class:`fedpriv.training.optimizers.PlainSGD`: the floats of ``torch.optim.SGD``, in one
    operator); ``torch_sgd``: ``torch.optim.SGD`` itself, as the plain step uses it."""
    from fedpriv.training import LocalOptimizer

    params = list(model.parameters())
    sizes = [p.numel() for p in params]
    opt = (torch.optim.SGD(params, lr=LR) if torch_sgd
           else LocalOptimizer().build(params, LR))

    def update(release: torch.Tensor) -> None:
        for p, g in zip(params, release.split(sizes), strict=True):
            p.grad = g.view_as(p)
        opt.step()

    return update


def _materialised_step(model, x, y, mech, per_example: PerExample) -> Callable[[], None]:
    from fedpriv.gradients import PerExampleGradients
    from fedpriv.mechanisms import make_generator

    gen, sizes = make_generator(0, 0, 0), [p.numel() for p in model.parameters()]
    update = _sgd_update(model)

    def step() -> None:
        grads, _ = per_example(model, x, y)
        source = PerExampleGradients(grads, None, tuple(sizes))
        update(mech.privatize(source, gen, batch_size=float(x.shape[0])))

    return step


#: The recorders :func:`_recorded` entered, left when the benchmark's process exits.
_HELD = contextlib.ExitStack()
atexit.register(_HELD.close)


def _recorded(model: torch.nn.Module) -> tuple[Any, Any]:
    """``model``'s layout and an entered recorder of its layers, held for the life of this
    throwaway model as :func:`fedpriv.training.local_train` holds them for its call (entered
    on :data:`_HELD`, so that each is left, its layers' ``forward`` put back, at exit)."""
    from fedpriv.gradients.linear import LayerRecorder, parameter_layout

    layout = parameter_layout(model)
    return layout, _HELD.enter_context(LayerRecorder(layout.layers))


def _ghost_step(model, x, y, mech, torch_sgd: bool = False) -> Callable[[], None]:
    """The production release: :func:`fedpriv.training.private_release` (ghost clipping for a
    clipping mechanism on the paper MLP), then the update (:func:`_sgd_update`). The model is
    walked once and its layers are recorded by one recorder (:func:`_recorded`), not per step,
    as :func:`fedpriv.training.local_train` does once per call."""
    from fedpriv.mechanisms import make_generator
    from fedpriv.training import private_release

    gen, (layout, recorder) = make_generator(0, 0, 0), _recorded(model)
    update = _sgd_update(model, torch_sgd)

    def step() -> None:
        update(private_release(model, x, y, mech, gen, batch_size=float(x.shape[0]),
                               layout=layout, recorder=recorder)[0])

    return step


def _local_train_step(model, x, y, mech) -> Callable[[], None]:
    """The production call: one step of :func:`fedpriv.training.local_train` on a fixed-size
    batch of all the records of ``x`` (default optimiser: plain SGD at ``LR``)."""
    from fedpriv.mechanisms import make_generator
    from fedpriv.training import local_train

    gen = make_generator(0, 0, 0)

    def step() -> None:
        local_train(model, x, y, mech, lr=LR, local_steps=1, batch_size=x.shape[0],
                    sampling="fixed", generator=gen)

    return step


def _plain_step(model, x, y) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def _opacus_step(model, x, y) -> Callable[[], None] | None:
    try:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
    except ImportError:
        return None
    gsm = GradSampleModule(copy.deepcopy(model))
    opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=LR), noise_multiplier=1.0,
                      max_grad_norm=1.0, expected_batch_size=x.shape[0])

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(gsm(x), y).backward()
        opt.step()

    return step


def _opacus_ghost_step(model, x, y) -> Callable[[], None] | None:
    """Opacus's ghost clipping (``GradSampleModuleFastGradientClipping``: a first backward for
    the per-example norms, a second on the rescaled loss) with its ``DPOptimizer``."""
    try:
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizerFastGradientClipping
        from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
    except ImportError:
        return None
    gsm = GradSampleModuleFastGradientClipping(copy.deepcopy(model), max_grad_norm=1.0,
                                               use_ghost_clipping=True)
    opt = DPOptimizerFastGradientClipping(torch.optim.SGD(gsm.parameters(), lr=LR),
                                          noise_multiplier=1.0, max_grad_norm=1.0,
                                          expected_batch_size=x.shape[0])
    criterion = DPLossFastGradientClipping(gsm, opt, torch.nn.CrossEntropyLoss())

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        criterion(gsm(x), y).backward()
        opt.step()

    return step


def _steps(batch: int = BATCH) -> dict[str, Callable[[], None]]:
    """One step of each route but the loop (Gaussian mechanism, σ = 1, C = 1)."""
    from fedpriv.mechanisms import build_mechanism

    x, y = _data(batch)
    mech = build_mechanism("gaussian", {})
    routes = _routes()
    steps = {"plain": _plain_step(_model(), x, y)}
    for name in ("vmap", "outer"):
        steps[f"dp_{name}"] = _materialised_step(_model(), x, y, mech, routes[name])
    steps["dp_ghost"] = _ghost_step(_model(), x, y, mech)
    steps["dp_local_train"] = _local_train_step(_model(), x, y, mech)
    for name, route in (("dp_opacus", _opacus_step), ("dp_opacus_ghost", _opacus_ghost_step)):
        step = route(_model(), x, y)
        if step is not None:
            steps[name] = step
    return steps


def paired(repeats: int, batch: int = BATCH, blocks: int = PAIRED_BLOCKS) -> dict[str, Any]:
    """The headline ratios: the plain step and the production step (``dp_ghost``; and the
    whole ``local_train`` call) timed with nothing else, in ``blocks`` blocks of ``repeats``
    steps each (fresh models per block); each block's ratio of medians, and their median.

    Apart from the other routes because those (``vmap``, Opacus: megabytes per step) evict
    the caches the next step starts from, which costs the DP step (more code and data) more
    than the plain one. Two orders: ``in_runs`` (the headline) runs each step
    :data:`RUN_LENGTH` times in a row before the next takes over, as a training loop does;
    ``alternating`` switches at every step, so each DP step starts from the branch history
    and caches of a plain step (and the other way round), which a training loop never does."""
    from fedpriv.mechanisms import build_mechanism

    x, y = _data(batch)
    mech = build_mechanism("gaussian", {})
    orders = {"in_runs": lambda fns: timed_in_runs(fns, repeats, RUN_LENGTH, warmup=3),
              "alternating": lambda fns: timed_interleaved(fns, repeats, warmup=3)}
    per_block = {order: {"dp_ghost": [], "dp_ghost_torch_sgd": [], "dp_local_train": []}
                 for order in orders}
    for _ in range(blocks):
        for order, timing in orders.items():
            times = timing({"plain": _plain_step(_model(), x, y),
                            "dp_ghost": _ghost_step(_model(), x, y, mech),
                            "dp_ghost_torch_sgd": _ghost_step(_model(), x, y, mech, True),
                            "dp_local_train": _local_train_step(_model(), x, y, mech)})
            for name, ratios in per_block[order].items():
                ratios.append(ratio(times[name], times["plain"]))
    return {"blocks": blocks, "repeats_per_block": repeats, "run_length": RUN_LENGTH,
            "ratios_per_block": per_block,
            "ratio_to_plain": {order: {k: round(statistics.median(v), 3) for k, v in r.items()}
                               for order, r in per_block.items()}}


def step_times(repeats: int, batch: int = BATCH, blocks: int = PAIRED_BLOCKS) -> dict[str, Any]:
    """Plain vs DP steps by every route at ``batch``, interleaved; the per-example loop apart;
    the headline ratio from :func:`paired`."""
    from fedpriv.mechanisms import build_mechanism

    steps = _steps(batch)
    times = timed_interleaved(steps, repeats, warmup=3)
    x, y = _data(batch)
    loop = _materialised_step(_model(), x, y, build_mechanism("gaussian", {}),
                              _routes()["loop"])  # ~100× slower: fewer runs
    times["dp_loop"] = timed(loop, max(3, repeats // 10), warmup=1)
    ratios = {k: ratio(v, times["plain"]) for k, v in times.items() if k != "plain"}
    of_minima = {k: ratio(v, times["plain"], "min") for k, v in times.items() if k != "plain"}
    pair = paired(repeats, batch, blocks)
    headline = pair["ratio_to_plain"]["in_runs"]["dp_ghost"]
    return {"steps_ms": times, "ratio_to_plain": ratios, "ratio_of_minima": of_minima,
            "paired": pair, "ratio_dp_to_plain": headline, "aim": AIM,
            "meets_aim": headline <= AIM,
            "opacus": "measured" if "dp_opacus" in steps else "not installed (skipped)",
            "batch": batch}


def page_faults(steps: int = 20) -> dict[str, float]:
    """Minor page faults per step of each route (after warm-up)."""
    out = {}
    for name, step in _steps().items():
        for _ in range(3):
            step()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(steps):
            step()
        out[name] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps
    return out


def malloc_tuned(repeats: int) -> dict[str, Any]:
    """:func:`step_times` in a child process with :data:`MALLOC_ENV` (see the docstring)."""
    argv = [sys.executable, "-m", "benchmarks.dp_step", "--steps-only", "--repeats", str(repeats)]
    done = subprocess.run(argv, cwd=Path(__file__).resolve().parent.parent, text=True,
                          env={**os.environ, **MALLOC_ENV}, capture_output=True, check=True)
    return {"env": MALLOC_ENV, **json.loads(done.stdout)}


def per_mechanism(repeats: int) -> dict[str, dict[str, Any]]:
    """One DP step per mechanism (default parameters) by each route that applies."""
    from fedpriv.mechanisms import ClippedMechanism, build_mechanism, mechanism_names

    x, y = _data()
    routes = _routes()
    out = {}
    for name in mechanism_names():
        mech = build_mechanism(name, {})
        steps = {r: _materialised_step(_model(), x, y, mech, routes[r]) for r in ("vmap", "outer")}
        if isinstance(mech, ClippedMechanism):
            steps["ghost"] = _ghost_step(_model(), x, y, mech)
        out[name] = timed_interleaved(steps, repeats, warmup=3)
    return out


def _plain_forward_backward(model, x, y) -> Callable[[], None]:
    """The plain step without its update: what the DP route's gradients compare with."""
    params = list(model.parameters())

    def step() -> None:
        for p in params:
            p.grad = None
        F.cross_entropy(model(x), y).backward()

    return step


def stages(repeats: int, batch: int) -> dict[str, Any]:
    """The production step (``dp_ghost``) built up stage by stage, every stage a whole call
    timed in runs with the others (:func:`~benchmarks.timing.timed_in_runs`, as the headline),
    so that each stage's marginal cost is measured in place (parts timed alone, on warm
    caches, add up to less than the step): the gradient
    source (forward, one backward to the layer outputs), then its clipped sum (per-example
    norms and one weighted product per layer), then the release (noise), then the update.
    ``noise_draw`` is the draw of ``p`` standard normals alone (torch's CPU generator)."""
    from fedpriv.gradients import gradient_source
    from fedpriv.mechanisms import build_mechanism, make_generator
    from fedpriv.training import private_release

    x, y = _data(batch)
    mech, gen = build_mechanism("gaussian", {}), make_generator(0, 0, 0)
    dim = sum(p.numel() for p in _model().parameters())
    models = [_model() for _ in range(3)]
    held = [_recorded(m) for m in models]
    runs = {
        "plain_forward_backward": _plain_forward_backward(_model(), x, y),
        "plain": _plain_step(_model(), x, y),
        "noise_draw": lambda: torch.empty(dim).normal_(generator=gen),
        "source": lambda: gradient_source(models[0], x, y, layout=held[0][0],
                                          recorder=held[0][1]),
        "clipped_sum": lambda: gradient_source(models[1], x, y, layout=held[1][0],
                                               recorder=held[1][1]).clipped_sum(
            mech.clip_bounds, mech.norm_ord),
        "release": lambda: private_release(models[2], x, y, mech, gen, batch_size=float(batch),
                                           layout=held[2][0], recorder=held[2][1]),
        "dp_ghost": _ghost_step(_model(), x, y, mech),
    }
    times = timed_in_runs(runs, repeats, RUN_LENGTH, warmup=3)
    med = {k: v["median"] for k, v in times.items()}
    marginal = {
        "plain: forward + backward": med["plain_forward_backward"],
        "plain: update": med["plain"] - med["plain_forward_backward"],
        "dp: forward + backward to the layer outputs": med["source"],
        "dp: norms + weighted products": med["clipped_sum"] - med["source"],
        "dp: noise + release arithmetic": med["release"] - med["clipped_sum"],
        "dp: update": med["dp_ghost"] - med["release"],
    }
    return {"batch": batch, "stages_ms": times,
            "marginal_ms": {k: round(v, 4) for k, v in marginal.items()},
            "share_of_plain": {k: round(v / med["plain"], 3) for k, v in marginal.items()},
            "noise_draw_share_of_plain": round(med["noise_draw"] / med["plain"], 3)}


def top_ops(batch: int, steps: int = 10) -> list[dict[str, Any]]:
    """torch.profiler's top operators (self CPU) over ``steps`` production steps
    (``dp_ghost``); the profiler's own overhead inflates small operators."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from fedpriv.mechanisms import build_mechanism

    x, y = _data(batch)
    step = _ghost_step(_model(), x, y, build_mechanism("gaussian", {}))
    for _ in range(3):
        step()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    table = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in table) or 1.0
    return [{"op": e.key, "calls_per_step": e.count // steps,
             "self_cpu_share": round(e.self_cpu_time_total / total, 3)} for e in table[:10]]


def profile(repeats: int, steps: int = 10) -> dict[str, Any]:
    """The production step by stages (:func:`stages`, ``repeats`` calls of each) and its top
    operators (:func:`top_ops`) at both batch sizes, and the page faults per step of each route
    over ``2 * steps`` steps."""
    return {"stages": {str(b): stages(repeats, b) for b in (SMALL_BATCH, BATCH)},
            "top_ops": {str(b): top_ops(b, steps) for b in (SMALL_BATCH, BATCH)},
            "minor_page_faults_per_step": page_faults(2 * steps)}


def measure(quick: bool = False, smoke: bool = False) -> dict[str, Any]:
    """All measurements of this section (``smoke``: one or two steps of each; module
    docstring)."""
    torch.set_num_threads(1)
    repeats = 2 if smoke else 30 if quick else 200
    parts = 1 if smoke else max(10, repeats // 4)
    blocks = 1 if smoke else PAIRED_BLOCKS
    return {
        **step_times(repeats, blocks=blocks),
        f"batch_{SMALL_BATCH}": step_times(repeats, SMALL_BATCH, blocks),
        "per_mechanism_ms": per_mechanism(parts),
        "profile": profile(2 if smoke else 5 * repeats, steps=1 if smoke else 10),
        "malloc_tuned": malloc_tuned(repeats),
        "batch": BATCH, "model": "paper-mlp (13,700 parameters)", "threads": 1,
        "repeats": repeats,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--smoke", action="store_true", help="one or two steps: runs, no timing")
    parser.add_argument("--steps-only", action="store_true", help="only the route comparison")
    parser.add_argument("--paired-only", action="store_true",
                        help="only the headline ratios (paired), at both batches")
    parser.add_argument("--repeats", type=int, help="timed steps per route")
    args = parser.parse_args()
    if args.paired_only:
        torch.set_num_threads(1)
        print(json.dumps({str(b): paired(args.repeats or 200, b) for b in (BATCH, SMALL_BATCH)}))
    elif args.steps_only:
        torch.set_num_threads(1)
        print(json.dumps(step_times(args.repeats or 200)))
    else:
        print(json.dumps(measure(args.quick, args.smoke)))
