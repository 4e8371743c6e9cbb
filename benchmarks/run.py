"""Run every fedpriv benchmark section and print (or save) one object of named measurements.

    python benchmarks/run.py [--quick | --smoke] [--json] [--sections a,b] [--out FILE]

Sections: ``dp_step`` (the cost of DP-SGD per step), ``mechanisms`` (one release per
mechanism at p = 13,700 and 10⁶), ``attacks`` (IGA/DLG speed, time to SSIM 0.9),
``attack_reach`` (the strongest attack's SSIM by batch size, mechanism and local steps beside
the two priors),
``accounting`` (ε per mechanism and accountant, calibration, ``fedpriv account`` wall time),
``capacity`` (log Bayes capacity at p = 13,700 and 10⁷, ``fedpriv compare``), ``vmf_pld`` (the
VMF PLD at κ = 100 … 10,000: grid chosen, size, seconds, ε against RDP), ``paper_cell``
(one run of the Fashion-MNIST study, part by part: 3 epochs of local DP-SGD, IGA per
iteration, per batch size; the simulation start-up), ``simulation``
(seconds per round on Ray with auditing off / logging / attacks, scaling, peak memory),
``scaling`` (10 to 10,000 clients in process and on Ray: seconds per round, the fedpriv share
per client, peak memory, bytes written per round, audit on vs off; float16 updates under IGA),
``ray_queue`` (Flower's per-node message scan against fedpriv's one pass: one pass alone at 10 to
10,000 nodes, and seconds and driver CPU seconds per round on Ray at 10 / 100 / 1,000 clients),
``audit_overhead`` (auditing off vs on, interleaved, in process: CPU and wall seconds per round
at 10 / 100 / 1,000 clients and their ratios; 10,000 clients off and audited), ``html_report``
(report.html render time and size for 10 to 1,000 clients), ``release_steps`` (steps mode
against update mode: bytes and server seconds per reply at the quickstart's 20 local steps).
Each section records its wall time, its CPU time (with the subprocesses it waited for) and the
load average before and after it; a section that fails is reported with its error and the
others still run. Nothing in a section asserts a time. ``--quick`` takes under 10 minutes on
2 idle cores.

``--smoke`` runs every part of every section at the smallest size that runs its code (one or
two repeats, two clients, two rounds; ``fedpriv simulate`` on Ray once in ``simulation``, in
``scaling`` and in ``ray_queue``, one client actor each; ``paper_cell`` checks its simulation
without starting Ray) and prints the same object. It measures nothing: it checks that the benchmarks
still run, and exits with status 1 when a section failed or a run inside one did
(:func:`errors`). The default test suite runs it (``tests/test_benchmarks_smoke.py``). See
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if __name__ == "__main__":  # as a script: measure this checkout, not an installed one
    sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # quiet torch.profiler on machines without a GPU

__all__ = ["SECTIONS", "errors", "headlines", "run"]


def _dp_step(size: str) -> dict[str, Any]:
    from benchmarks.dp_step import measure

    return measure(size == "quick", smoke=size == "smoke")


def _mechanisms(size: str) -> dict[str, Any]:
    from benchmarks.mechanisms import BATCH, DIM, release_table

    if size == "smoke":
        return release_table(sizes=((DIM, BATCH),), repeats=1)
    return release_table(repeats=10 if size == "quick" else 50)


def _attacks(size: str) -> dict[str, Any]:
    from benchmarks.attack_speed import measure

    return measure(size == "quick", smoke=size == "smoke")


def _attack_reach(size: str) -> dict[str, Any]:
    from benchmarks.attack_reach import measure

    return measure(size == "quick", smoke=size == "smoke")


def _accounting(size: str) -> dict[str, Any]:
    from benchmarks.accounting import (
        budget_check_seconds,
        calibration_seconds,
        cli_vmf_seconds,
        ledger_seconds,
    )
    from benchmarks.epsilon_table import epsilon_table

    quick, smoke = size != "full", size == "smoke"
    return {
        "epsilon": epsilon_table(quick, smoke=smoke),
        "calibration_to_epsilon_1": calibration_seconds(quick),
        "cli_vmf_T1e5": cli_vmf_seconds(1 if smoke else 3 if quick else 5),
        "client_ledger_100_clients": ledger_seconds(2, 2) if smoke else ledger_seconds(),
        "client_budget_check": budget_check_seconds(1 if smoke else 10),
    }


def _capacity(size: str) -> dict[str, Any]:
    from benchmarks.leakage import leakage_costs

    return leakage_costs(size == "quick", smoke=size == "smoke")


def _vmf_pld(size: str) -> dict[str, Any]:
    from benchmarks.vmf_pld import measure

    return measure(smoke=size == "smoke")


def _paper_cell(size: str) -> dict[str, Any]:
    from benchmarks.paper_cell import measure

    return measure(size == "quick", smoke=size == "smoke")


def _audit_overhead(size: str) -> dict[str, Any]:
    from benchmarks.audit_overhead import measure

    return measure(size == "quick", smoke=size == "smoke")


def _simulation(size: str) -> dict[str, Any]:
    from benchmarks.audit_costs import audit_costs
    from benchmarks.simulation import measure

    quick, smoke = size == "quick", size == "smoke"
    return {**measure(quick, smoke=smoke), "server_audit_costs": audit_costs(quick, smoke=smoke)}


def _canaries(size: str) -> dict[str, Any]:
    from benchmarks.canaries import measure

    return measure(size == "quick", smoke=size == "smoke")


def _scaling(size: str) -> dict[str, Any]:
    from benchmarks.scaling import measure
    from benchmarks.update_dtype import measure as update_dtype

    smoke = size == "smoke"
    return {**measure(size == "quick", smoke=smoke),
            "float16_attack": update_dtype(iterations=5 if smoke else None)}


def _ray_queue(size: str) -> dict[str, Any]:
    from benchmarks.ray_queue import measure

    return measure(size == "quick", smoke=size == "smoke")


def _release_steps(size: str) -> dict[str, Any]:
    from benchmarks.release_steps import measure

    return measure(size == "quick", smoke=size == "smoke")


def _html_report(size: str) -> dict[str, Any]:
    from benchmarks.html_report import measure

    return measure(size == "quick", smoke=size == "smoke")


SECTIONS: dict[str, Callable[[str], dict[str, Any]]] = {
    # each takes the size: "full", "quick" or "smoke"
    "dp_step": _dp_step,
    "mechanisms": _mechanisms,
    "attacks": _attacks,
    "attack_reach": _attack_reach,
    "accounting": _accounting,
    "capacity": _capacity,
    "vmf_pld": _vmf_pld,
    "paper_cell": _paper_cell,
    "simulation": _simulation,
    "canaries": _canaries,
    "scaling": _scaling,
    "ray_queue": _ray_queue,
    "audit_overhead": _audit_overhead,
    "html_report": _html_report,
    "release_steps": _release_steps,
}


def _cpu_seconds() -> float:
    """User and system CPU seconds of this process and of its children that were waited for
    (simulation subprocesses and, through them, most of their Ray processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _section(name: str, size: str) -> dict[str, Any]:
    from benchmarks.machine import load_average

    entry: dict[str, Any] = {"load_average_before": load_average()}
    start, cpu = time.perf_counter(), _cpu_seconds()
    try:
        entry["result"] = SECTIONS[name](size)
    except Exception:  # a benchmark reports a failure; it does not raise
        entry["error"] = traceback.format_exc(limit=5)
    entry["seconds"] = round(time.perf_counter() - start, 1)
    entry["cpu_seconds"] = round(_cpu_seconds() - cpu, 1)
    entry["load_average_after"] = load_average()
    print(f"[run] {name}: {entry['seconds']} s ({entry['cpu_seconds']} s CPU)", file=sys.stderr,
          flush=True)
    return entry


def run(
    quick: bool = False, sections: list[str] | None = None, *, smoke: bool = False
) -> dict[str, Any]:
    """Run ``sections`` (default: all) and return the whole object.

    Parameters
    ----------
    quick
        Fewer repeats, rounds and runs (module docstring).
    sections
        Names from :data:`SECTIONS`; ``None`` runs them all.
    smoke
        Every part of every section at the smallest size that runs its code (one or two
        repeats, two clients, two rounds, one small Ray run in ``simulation`` and one in
        ``scaling``): a check that the benchmarks run, not a measurement. Overrides ``quick``.
    """
    from benchmarks.machine import machine_info

    size = "smoke" if smoke else "quick" if quick else "full"
    start = time.perf_counter()
    out = {
        "date": datetime.date.today().isoformat(),
        "quick": quick and not smoke,
        "smoke": smoke,
        "machine": machine_info(),
        "sections": {name: _section(name, size) for name in sections or SECTIONS},
    }
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def errors(result: Any, path: str = "") -> list[str]:
    """``path: message`` of every non-empty ``"error"`` in :func:`run`'s object: a failed
    section, and a failed run inside a section (a simulation subprocess that exited non-zero),
    which the section reports without failing."""
    found = []
    if isinstance(result, dict):
        if result.get("error"):
            found.append(f"{path or '.'}: {str(result['error']).strip()[-2000:]}")
        for key, value in result.items():
            if key != "error":
                found += errors(value, f"{path}/{key}")
    elif isinstance(result, list):
        for i, value in enumerate(result):
            found += errors(value, f"{path}[{i}]")
    return found


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _median(summary: Any) -> str:
    value = _get(summary, "median")
    return "-" if value is None else f"{value:.4g}"


def _dp_lines(r: dict[str, Any]) -> list[str]:
    steps = r["steps_ms"]
    lines = ["  step ms (median): " + ", ".join(f"{k} {_median(v)}" for k, v in steps.items()),
             f"  ratio to plain, every route round-robin: {r['ratio_to_plain']}",
             f"  dp_ghost / plain: {r['ratio_dp_to_plain']} in runs of steps, "
             f"{_get(r, 'paired', 'ratio_to_plain', 'alternating', 'dp_ghost')} alternating "
             f"(aim {r['aim']}: {'met' if r['meets_aim'] else 'MISSED'})"]
    small = r.get("batch_16")
    if small:
        lines.append(f"  batch 16, ratio to plain: {small['ratio_to_plain']}; dp_ghost / plain "
                     f"{small['ratio_dp_to_plain']} in runs")
    tuned = r.get("malloc_tuned", {})
    if tuned:
        lines.append(f"  glibc keeping freed memory: {tuned['ratio_to_plain']}")
    for name, row in r["per_mechanism_ms"].items():
        lines.append(f"  {name:>8}: " + ", ".join(f"{k} {_median(v)} ms" for k, v in row.items()))
    return lines


def _table_lines(rows: dict[str, Any], value: str, time_key: str, scale: str) -> list[str]:
    return [f"  {k}: {value} {_get(v, value)!s:.10}  ({_median(_get(v, time_key))} {scale})"
            for k, v in rows.items()]


def _simulation_lines(r: dict[str, Any]) -> list[str]:
    lines = []
    for run_ in r["runs"]:
        key = f"{run_['clients']}/{run_['mode']}"
        note = f"ERROR {run_['error'][-80:]!r}" if "error" in run_ else (
            f"{_median(run_.get('round_seconds'))} s/round, start-up "
            f"{run_.get('startup_seconds')} s + round 1 {run_.get('round1_seconds')} s, "
            f"peak PSS {run_.get('peak_pss_mib')} MiB")
        lines.append(f"  {key}: {note}")
    for key, pooled in r["pooled"].items():
        lines.append(f"  pooled {key}: {_median(_get(pooled, 'round_seconds'))} s/round")
    lines.append(f"  audit overhead (logging/off): {r['audit_overhead']}")
    costs = _get(r, "server_audit_costs", "per_round_s") or {}
    lines.append("  server audit work per round: "
                 + ", ".join(f"{k} {_median(v)} s" for k, v in costs.items()))
    return lines


def _audit_overhead_lines(r: dict[str, Any]) -> list[str]:
    lines = [f"  {n} clients: CPU s/round off {_median(_get(v, 'off', 'cpu_s'))}, audit "
             f"{_median(_get(v, 'audit', 'cpu_s'))}: audit/off {v['ratio_cpu']} CPU "
             f"(pairs {v['ratio_cpu_pairs_median']}), {v['ratio_wall']} wall"
             for n, v in r["settings"].items()]
    big = r["large"]
    return [*lines, f"  {big['clients']} clients: audited {_median(big['cpu_s'])} CPU s, "
            f"{_median(big['wall_s'])} s per round; off {_median(big.get('off_cpu_s'))} CPU s: "
            f"audit/off {big.get('ratio_cpu')} CPU"]


def _scaling_lines(r: dict[str, Any]) -> list[str]:
    lines = [f"  local DP step alone: {_median(r['dp_step_ms'])} ms"]
    for key, pooled in r["pooled"].items():
        lines.append(f"  {key}: {_median(_get(pooled, 'round_seconds'))} s/round, peak PSS "
                     f"{pooled['peak_pss_mib']} MiB")
    for run_ in r["runs"]:
        ms = run_.get("per_client_ms")
        if ms:
            lines.append(f"  {run_['route']}/{run_['clients']}/{run_['mode']} ms per client: "
                         + ", ".join(f"{k} {v}" for k, v in ms.items() if v))
    lines.append(f"  targets: {r['targets']}")
    worst = _get(r, "float16_attack", "max_abs_ssim_difference")
    lines.append(f"  float16 updates: IGA SSIM moves by at most {worst}")
    return lines


def _ray_queue_lines(r: dict[str, Any]) -> list[str]:
    lines = [f"  one pass, {row['nodes']} nodes, {row['loop']}: "
             f"{_median(row['later_cpu_s'])} CPU s" for row in r["tick"]]
    lines += [f"  one pull, {row['pending']} pending: {_median(row['pull_cpu_s'])} CPU s"
              for row in r["pull"]]
    lines += [f"  {key}: {_median(_get(p, 'round_seconds'))} s/round, "
              f"{_median(_get(p, 'driver_cpu_seconds'))} driver CPU s/round"
              for key, p in r["pooled"].items()]
    return [*lines, f"  ratios: {r['ratios']}"]


def headlines(result: dict[str, Any]) -> list[str]:
    """A short human summary of :func:`run`'s object."""
    m = result["machine"]
    lines = [f"{m['cpu_model']} x{m['cpu_count']}, {m['ram_gib']} GiB, load {m['load_average']}"]
    render = {
        "dp_step": _dp_lines,
        "mechanisms": lambda r: [f"  {p}: " + ", ".join(f"{k} {_median(v)}" for k, v in
                                                        row["ms"].items()) + " ms"
                                 for p, row in r.items()],
        "attacks": lambda r: [f"  iterations/s: {r.get('iterations_per_second')}",
                              f"  time to SSIM 0.9: {r.get('time_to_ssim_0.9')}"],
        "attack_reach": lambda r: [f"  batch {row['batch']} {row['mechanism']} K "
                                   f"{row['steps']}: {row['kept']} SSIM "
                                   f"{row['ssim']:.2f} (no-update prior "
                                   f"{row['no_update_prior_ssim']:.2f}, label prior "
                                   f"{row['label_prior_ssim']:.2f})" for row in r["rows"]],
        "accounting": lambda r: _table_lines(r["epsilon"]["rows"], "epsilon", "seconds", "s")
        + [f"  calibration: {r['calibration_to_epsilon_1']}",
           f"  fedpriv account (VMF, T=1e5): {r['cli_vmf_T1e5']}"],
        "capacity": lambda r: _table_lines(r["capacity"], "log_capacity", "ms", "ms"),
        "vmf_pld": lambda r: [f"  kappa {row['kappa']:g}: Δ {row['discretization']:.3g}, "
                              f"{row['composed_points']:,} points, {row['seconds']} s, "
                              f"ε PLD {row['epsilon_pld']:.6g} (RDP {row['epsilon_rdp']:.6g})"
                              for row in r["rows"]],
        "paper_cell": lambda r: [f"  train 3 epochs (s): {r['train_seconds']}",
                                 f"  IGA ms/iteration: {r['iga_ms_per_iteration']}",
                                 "  simulation overhead: "
                                 f"{r.get('simulation_overhead_seconds')} s"],
        "simulation": _simulation_lines,
        "canaries": lambda r: [f"  {k}: " + ", ".join(f"{n} {_median(v)}" for n, v in row.items())
                               for k, row in r["rows"].items()],
        "scaling": _scaling_lines,
        "ray_queue": _ray_queue_lines,
        "audit_overhead": _audit_overhead_lines,
        "html_report": lambda r: [
            f"  {n} clients: {_median(v['seconds'])} s, {v['bytes'] / 2**20:.2f} MiB"
            for n, v in r["render"].items()
        ] + ["  write_report: " + ", ".join(f"{k} {_median(v)} s"
                                           for k, v in r["per_round"].items())],
        "release_steps": lambda r: [
            f"  {mode}: {r[mode]['bytes_per_reply']:,} bytes, "
            f"{_median(r[mode]['server_s_per_reply'])} s per reply ({r[mode]['verdicts']})"
            for mode in ("update", "steps")],
    }
    for name, entry in result["sections"].items():
        lines.append(f"{name} ({entry['seconds']} s, load {entry['load_average_before']} -> "
                     f"{entry['load_average_after']})")
        if "error" in entry:
            lines.append("  ERROR: " + entry["error"].strip().splitlines()[-1])
            continue
        try:
            lines += render[name](entry["result"])
        except (KeyError, TypeError, AttributeError) as exc:
            lines.append(f"  (no summary: {exc!r}; see --json)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer repeats, rounds and runs")
    size.add_argument("--smoke", action="store_true",
                      help="every section at the smallest sizes (under a minute; measures "
                           "nothing); exit status 1 if any section or run in it failed")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--sections", help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args()
    chosen = args.sections.split(",") if args.sections else None
    unknown = sorted(set(chosen or ()) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {unknown}; choose from {list(SECTIONS)}")
    from fedpriv.jsonio import dumps, write_json

    result = run(args.quick, chosen, smoke=args.smoke)
    if args.out:
        write_json(args.out, result)
    print(dumps(result) if args.json else "\n".join(headlines(result)))
    failed = errors(result)
    if args.smoke and failed:
        print("\n".join(["[run] smoke run failed:", *failed]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
