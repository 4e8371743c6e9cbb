"""``study.md``: the settings, the table, and what the rows say — every statement computed.

The table gives per cell the formal ε of per-step composition (and the per-epoch
compatibility figure, labelled as such), the log Bayes capacity of the attacked release(s),
and accuracy, MSE, SSIM and PSNR as the mean over seeds ± the half-width of a 95% Student-t
interval. The comparison statements are derived from the rows at write time: per matched ε
(calibrated cells), VMF against Gaussian (and Laplace against Gaussian when present); across
all cells, how well the log Bayes capacity and ε each order the reconstruction MSE —
Spearman's ρ (:func:`scipy.stats.spearmanr`) and, over pairs of cells from different
mechanisms, the fraction of pairs in which the larger capacity (or ε) goes with the smaller
MSE. Nothing in the text is fixed in advance.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedpriv.atomic import atomic_write_bytes
from fedpriv.config import Config
from workflows.sweep.plan import SweepSetting, seeds
from workflows.sweep.rows import Row, number
from workflows.sweep.style import label

__all__ = ["PUBLISHED", "concordance", "study_markdown", "write_study"]

PUBLISHED = ("Biswas et al. (arXiv 2502.04045): MNIST and Fashion-MNIST (60,000 training "
             "images, 16×16), the paper MLP, centralised DP-SGD with batch 128 for 3 epochs "
             "(q = 128/60,000, T ≈ 1,407 releases), Adam (lr 0.005, weight decay 0.1), IGA "
             "with 10,000 iterations on a single-step release at the start of training")


def _fmt(value: Any, digits: int = 3) -> str:
    x = number(value)
    return "–" if math.isnan(x) else ("∞" if x == math.inf else f"{x:.{digits}g}")


def _with_ci(row: Row, key: str) -> str:
    ci = row.get(f"{key}_ci")
    return _fmt(row[key]) + (f" ± {_fmt(ci, 2)}" if ci is not None else "")


def _clients(cfg: Config) -> str:
    k = cfg.sweep.attack_clients
    return "client 0" if k == 1 else f"clients 0–{k - 1}"


def _shape(setting: SweepSetting) -> str:
    return "×".join(map(str, setting.input_shape[-2:]))


def _optimizer(cfg: Config) -> str:
    t = cfg.train
    extra = [f"momentum {t.momentum:g}"] if t.momentum else []
    extra += ["Nesterov"] if t.nesterov else []
    extra += [f"weight decay {t.weight_decay:g}"] if t.weight_decay else []
    extra += [f"betas {t.betas[0]:g}/{t.betas[1]:g}"] if t.optimizer != "sgd" else []
    return f"{t.optimizer} (lr {t.lr:g}{''.join(', ' + e for e in extra)}; fresh every round)"


def _attacked(cfg: Config) -> str:
    if cfg.sweep.attack_on == "first-release":
        return (f"the first noisy release of training of {_clients(cfg)}, shown by a one-step "
                "probe (same θ₀, batch and noise)")
    return f"the round-1 update of {_clients(cfg)}"


def _settings(cfg: Config, settings: Sequence[SweepSetting]) -> list[str]:
    first, t = settings[0], cfg.train
    sizes = first.client_sizes
    accounting = "; ".join(
        f"L = {s.batch_size}: q = {s.sample_rate:.4g}, {s.local_steps} local steps, T = "
        f"{s.steps} releases ({s.epochs:.3g} epochs; per-epoch compatibility T = "
        f"{s.epoch_releases})" for s in settings)
    runs = seeds(cfg)
    rows = [
        ("data", f"{cfg.data.name} ({_shape(first)}), {sum(sizes)} training records, "
                 f"{cfg.data.partition} split over {len(sizes)} client(s) "
                 f"({min(sizes)}–{max(sizes)} each)"),
        ("model", f"{cfg.model.name}, p = {first.dim:,} parameters"),
        ("training", f"{cfg.rounds} round(s) of {cfg.strategy.name}, {t.sampling} batches, "
                     f"optimizer {_optimizer(cfg)}, fraction_train {t.fraction_train:g}"),
        ("accounting", f"{accounting}; δ = {first.delta:g}, {first.accountant.upper()} "
                       "accountant, add/remove one record, per-step composition"),
        ("attack", f"{cfg.sweep.attack.upper()}, {cfg.sweep.attack_iterations} iterations, "
                   f"{cfg.audit.restarts} restart(s), on {_attacked(cfg)}"),
        ("capacity", f"{cfg.audit.threat_model}-level log Bayes capacity of the attacked "
                     "release(s)"),
        ("seeds", f"{len(runs)} ({', '.join(map(str, runs))}); ± is the half-width of a 95% "
                  "Student-t interval over seeds"),
    ]
    return ["| setting | value |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows)]


def _parameter(row: Row) -> str:
    name = row.get("parameter_name")
    return "–" if name is None else f"{name} = {_fmt(row[name], 4)}"


_TABLE_MEASURED = ("accuracy", "mse", "ssim", "psnr", "support_ssim", "no_update_prior_ssim",
                   "no_update_gain_ssim", "prior_ssim", "gain_ssim", "identification_log_lower")


def _table(rows: Sequence[Row]) -> list[str]:
    head = ("| mechanism | L | parameter | target ε | ε (per step) | ε (per epoch, compat.) "
            "| log C (attacked) | accuracy | MSE | SSIM | PSNR | support SSIM "
            "| no-update prior SSIM | gain over it | label prior SSIM | gain over it "
            "| log(M·P̂) lower end |")
    lines = [head, "|" + " --- |" * 17]
    for r in rows:
        lines.append(
            f"| {label(r['mechanism'])} | {r['batch_size']} | {_parameter(r)} | "
            f"{_fmt(r['target_epsilon'])} | {_fmt(r['achieved_epsilon'], 4)} | "
            f"{_fmt(r['epsilon_per_epoch'], 4)} | {_fmt(r['log_capacity'], 4)} | "
            f"{' | '.join(_with_ci(r, k) for k in _TABLE_MEASURED)} |"
        )
    return lines


def _calibrated(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.get("target_epsilon") is not None]


def _pair_lines(rows: Sequence[Row], other: str) -> list[str]:
    """Per matched ε and batch size: ``other`` against Gaussian, and how often it had the
    higher MSE."""
    by = {(r["mechanism"], r["batch_size"], number(r["epsilon"])): r for r in _calibrated(rows)}
    shared = sorted((b, e) for m, b, e in by if m == other and ("gaussian", b, e) in by)
    name, lines, higher, lower_ssim, lower_acc = label(other), [], 0, 0, 0
    for batch, eps in shared:
        a, g = by[(other, batch, eps)], by[("gaussian", batch, eps)]
        higher += number(a["mse"]) > number(g["mse"])
        lower_ssim += number(a["ssim"]) < number(g["ssim"])
        lower_acc += number(a["accuracy"]) < number(g["accuracy"])
        lines.append(
            f"- ε = {eps:g}, L = {batch}: {name} MSE {_fmt(a['mse'])} vs Gaussian "
            f"{_fmt(g['mse'])}; SSIM {_fmt(a['ssim'])} vs {_fmt(g['ssim'])}; accuracy "
            f"{_fmt(a['accuracy'])} vs {_fmt(g['accuracy'])}; log C "
            f"{_fmt(a['log_capacity'], 4)} vs {_fmt(g['log_capacity'], 4)}."
        )
    if shared:
        lines.append(f"- Over the {len(shared)} matched ε: {name} has the higher MSE at "
                     f"{higher}, the lower SSIM at {lower_ssim} and the lower accuracy at "
                     f"{lower_acc}.")
    return lines


def _nearest_lines(rows: Sequence[Row], other: str, within: float = 2.0) -> list[str]:
    """Cells of ``other`` beside the Gaussian cell of the same batch size whose per-step ε is
    nearest (within a factor ``within``): the comparison "at similar ε" of an explicit grid."""
    explicit = [r for r in rows if r.get("target_epsilon") is None
                and r.get("parameter_name") is not None]
    lines, higher, lower_acc = [], 0, 0
    for a in (r for r in explicit if r["mechanism"] == other):
        ea = number(a["achieved_epsilon"])
        near = [g for g in explicit if g["mechanism"] == "gaussian"
                and g["batch_size"] == a["batch_size"]]
        if not near or not math.isfinite(ea):
            continue
        g = min(near, key=lambda r: abs(math.log(number(r["achieved_epsilon"]) / ea)))
        eg = number(g["achieved_epsilon"])
        if max(ea / eg, eg / ea) > within:
            continue
        higher += number(a["mse"]) > number(g["mse"])
        lower_acc += number(a["accuracy"]) < number(g["accuracy"])
        lines.append(
            f"- L = {a['batch_size']}: {label(other)} {_parameter(a)} (ε {_fmt(ea)}) vs "
            f"Gaussian {_parameter(g)} (ε {_fmt(eg)}): accuracy {_with_ci(a, 'accuracy')} vs "
            f"{_with_ci(g, 'accuracy')}; MSE {_with_ci(a, 'mse')} vs {_with_ci(g, 'mse')}; "
            f"SSIM {_with_ci(a, 'ssim')} vs {_with_ci(g, 'ssim')}."
        )
    if lines:
        lines.append(f"- Of these {len(lines)} pairs at per-step ε within a factor {within:g}, "
                     f"{label(other)} has the higher MSE in {higher} and the lower accuracy in "
                     f"{lower_acc}.")
    return lines


def _noise_lines(rows: Sequence[Row], accountant: str) -> list[str]:
    """How much more noise VMF got than Gaussian at each matched ε, in Gaussian-equivalent σ."""
    by = {(r["mechanism"], r["batch_size"], number(r["epsilon"])): r for r in _calibrated(rows)}
    ratios = [(e, number(by[("vmf", b, e)]["gaussian_equivalent_sigma"])
               / number(by[("gaussian", b, e)]["noise_multiplier"]))
              for m, b, e in sorted(by) if m == "vmf" and ("gaussian", b, e) in by]
    listed = ", ".join(f"{r:.2f}× at ε = {e:g}" for e, r in ratios)
    lines = [f"- VMF's Gaussian-equivalent σ = √p/(2κ) over the Gaussian's σ: {listed}."
             ] if ratios else []
    small = sorted({f"{number(r['achieved_epsilon']):.3g}" for r in rows
                    if r["mechanism"] == "vmf" and number(r["kappa"]) < 1.0})
    if small:
        lines.append(f"- VMF κ < 1 at ε = {', '.join(small)}: the calibration's monotonicity "
                     "in κ is proven for κ ≥ 1 only (Biswas et al., Thm 1).")
    if accountant == "rdp" and any(r["mechanism"] == "vmf" for r in rows):
        lines.append("- With the RDP accountant the subsampled Gaussian is accounted exactly "
                     "(dp-accounting) but VMF through the generic subsampling bound of Zhu & "
                     "Wang (privacy-math.md §3), so part of VMF's ε is accounting slack; "
                     "`audit.accountant = \"pld\"` accounts both tightly where the VMF PLD "
                     "fits in memory.")
    return lines


def concordance(rows: Sequence[Row], key: str) -> tuple[int, int]:
    """Over pairs of cells of different mechanisms with distinct finite ``key`` and MSE
    values: how many pairs have the larger ``key`` with the smaller MSE, out of how many."""
    agree = total = 0
    for a, b in itertools.combinations(rows, 2):
        if a["mechanism"] == b["mechanism"]:
            continue
        dk = number(a[key]) - number(b[key])
        dm = number(a["mse"]) - number(b["mse"])
        if math.isfinite(dk) and math.isfinite(dm) and dk != 0 and dm != 0:
            total += 1
            agree += (dk > 0) != (dm > 0)
    return agree, total


def _spearman(rows: Sequence[Row], key: str) -> float:
    from scipy.stats import spearmanr

    pairs = [(number(r[key]), number(r["mse"])) for r in rows]
    pairs = [p for p in pairs if all(math.isfinite(v) for v in p)]
    if len(pairs) < 3:
        return math.nan
    return float(spearmanr([p[0] for p in pairs], [p[1] for p in pairs]).statistic)


def _ordering_lines(rows: Sequence[Row]) -> list[str]:
    lines = []
    for key, name in (("log_capacity", "log Bayes capacity"), ("achieved_epsilon",
                                                               "ε (per step)")):
        agree, total = concordance(rows, key)
        rho = _spearman(rows, key)
        share = f"{agree}/{total}" if total else "no"
        lines.append(f"- {name}: Spearman ρ with MSE over the cells with a guarantee = "
                     f"{_fmt(rho, 3)}; in {share} cross-mechanism pairs the larger {name} has "
                     "the lower MSE.")
    return lines


def _baseline_lines(rows: Sequence[Row]) -> list[str]:
    return [f"- {label(r['mechanism'])} (L = {r['batch_size']}, no formal guarantee): accuracy "
            f"{_with_ci(r, 'accuracy')}, MSE {_with_ci(r, 'mse')}, SSIM {_with_ci(r, 'ssim')}."
            for r in rows if r.get("parameter_name") is None]


def _spread_lines(rows: Sequence[Row]) -> list[str]:
    """How wide the seed intervals are, and which neighbouring cells they cannot separate."""
    widths = [number(r.get("accuracy_ci")) for r in rows]
    widths = [w for w in widths if math.isfinite(w)]
    if not widths:
        return ["- One seed per cell: no interval, and single-seed differences may be noise."]
    lines = [f"- 95% intervals of accuracy over seeds are ±{min(widths):.3g} to "
             f"±{max(widths):.3g} wide."]
    overlapping = 0
    pairs = 0
    for a, b in itertools.pairwise(rows):
        if a["mechanism"] != b["mechanism"] or a["batch_size"] != b["batch_size"]:
            continue
        pairs += 1
        lo_a, hi_a = (number(a["accuracy"]) + s * number(a["accuracy_ci"]) for s in (-1, 1))
        lo_b, hi_b = (number(b["accuracy"]) + s * number(b["accuracy_ci"]) for s in (-1, 1))
        overlapping += max(lo_a, lo_b) <= min(hi_a, hi_b)
    if pairs:
        lines.append(f"- In {overlapping}/{pairs} pairs of neighbouring cells of one mechanism "
                     "the accuracy intervals overlap: those steps in noise are not resolved.")
    return lines


def _checks(rows: Sequence[Row]) -> list[str]:
    calibrated = _calibrated(rows)
    over = [r for r in calibrated if number(r["achieved_epsilon"]) > number(r["epsilon"])]
    tallied = [r for r in rows if math.isfinite(number(r["run_epsilon"]))]
    disagree = [r for r in tallied if not math.isclose(number(r["run_epsilon"]),
                                                       number(r["achieved_epsilon"]),
                                                       rel_tol=1e-6)]
    gains = [g for g in (number(r["gain_ssim"]) for r in rows) if math.isfinite(g)]
    totals = [g for g in (number(r.get("no_update_gain_ssim")) for r in rows) if math.isfinite(g)]
    return [
        *([f"- Calibrated ε ≤ target in {len(calibrated) - len(over)}/{len(calibrated)} "
           "cells."] if calibrated else []),
        f"- The runs' own auditors tallied the cell's per-step ε in "
        f"{len(tallied) - len(disagree)}/{len(tallied)} cells with a guarantee.",
        *([f"- The SSIM gain of the reconstruction over the no-update prior (the public mean "
           "image: what the attacker has before any update) — the update's total leakage — "
           f"ranges over [{min(totals):.3g}, {max(totals):.3g}]."] if totals else []),
        *([f"- The SSIM gain over the label prior (the public class means of the labels the "
           "update gives away) — leakage beyond the labels — ranges over "
           f"[{min(gains):.3g}, {max(gains):.3g}]: at or below 0 the reconstruction shows "
           "nothing the labels did not already give, by SSIM; the identification score "
           "(log(M·P̂) against its bound) can still show it."] if gains else []),
    ]


def _differences(cfg: Config, settings: Sequence[SweepSetting]) -> list[str]:
    first = settings[0]
    clients = len(first.client_sizes)
    framework = ("one client holding every record, one Flower round: centralised DP-SGD run "
                 "through the federated code path (Flower simulation on Ray, the ClientApp, "
                 "FedAvg of one update, the auditing server)" if clients == 1 else
                 f"{clients} federated clients ({cfg.strategy.name}), not centralised DP-SGD")
    return [
        f"- Published: {PUBLISHED}.",
        f"- Here: {cfg.data.name} ({_shape(first)}, {sum(first.client_sizes)} training "
        f"records); {framework}; PyTorch {_optimizer(cfg)} on the privatised gradient "
        "(decay after the noise, as Opacus does); δ = "
        f"{first.delta:g}; {cfg.sweep.attack.upper()} with {cfg.sweep.attack_iterations} "
        f"iterations on {_attacked(cfg)}.",
        "- Attack: fedpriv's own IGA (cosine loss + total variation, Adam on signed gradients, "
        "step decay, labels recovered analytically from the last layer, uniform random start, "
        f"TV weight {cfg.audit.tv_weight:g}), not the authors' code.",
        "- SSIM is scikit-image's plain SSIM (7×7 window, data range 1), not a wavelet SSIM.",
        "- Accounting unit: ε composes over every noisy release (per-step, T above); the "
        "per-epoch column composes once per epoch — the unit of some published tables — and "
        "understates ε.",
    ]


def study_markdown(
    cfg: Config, settings: Sequence[SweepSetting], rows: Sequence[Row], figures: Sequence[str]
) -> str:
    """The study report as Markdown (module docstring)."""
    mechanisms = {r["mechanism"] for r in rows}
    said = [line for m in ("vmf", "laplace") if m in mechanisms and "gaussian" in mechanisms
            for line in (*_pair_lines(rows, m), *_nearest_lines(rows, m))]
    parts = [
        "# Mechanisms compared", "", "## Settings", "", *_settings(cfg, settings), "",
        "## Results", "", *_table(rows), "", "## What the data say", "", *said,
        *_baseline_lines(rows), *_ordering_lines(rows),
        *_noise_lines(rows, settings[0].accountant), *_spread_lines(rows), *_checks(rows), "",
        "## Figures", "",
        *(f"![{Path(f).stem}]({Path(f).name})" for f in figures), "",
        "## What differs from the published study", "", *_differences(cfg, settings), "",
    ]
    return "\n".join(parts)


def write_study(path: Path, markdown: str) -> str:
    """Write ``study.md`` atomically; return its path."""
    atomic_write_bytes(path, markdown.encode())
    return str(path)
