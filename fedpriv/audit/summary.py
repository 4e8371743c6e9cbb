"""The run's summary as the terminal shows it: ``fedpriv simulate`` and ``deploy-local`` print
it at the end, and so does the ServerApp under ``flwr run`` (its log), from the same report."""

from __future__ import annotations

from typing import Any

from fedpriv.audit.vacuity import terminal_marks

__all__ = ["render_summary"]


def render_summary(result: dict[str, Any]) -> str:
    """A short human summary of the report: run directory, rounds, accuracy, the per-client
    ε table, failures and the chain head."""
    acc = result["accuracy"]
    lines = [
        f"run directory: {result['run_dir']}",
        f"rounds: {result['rounds']}   final accuracy: {acc[-1]:.4f}" if acc else "no rounds",
        f"wall time: {_num(result['wall_seconds'])} s",
        f"{'client':>6} {'mechanism':>9} {'rounds':>6} {'epsilon':>9} {'log C':>10} {'SSIM':>6}",
    ]
    marks, footnote = terminal_marks(result["clients"], "log_bayes_capacity")
    for c, mark in zip(result["clients"], marks, strict=True):
        eps, cap, ssim = c["epsilon"], c["log_bayes_capacity"], (c["attack"] or {}).get("ssim")
        lines.append(
            f"{c['client_id']:>6} {c['mechanism'] or '-':>9} {c['rounds_participated']:>6} "
            f"{_num(eps):>9} {_num(cap) + mark:>10} {_num(ssim):>6}"
        )
    lines += footnote
    if result["epsilon_bounds"]["note"]:
        lines.append(result["epsilon_bounds"]["note"])
    for f in result.get("failures", []):
        lines.append(f"round {f['round']}: client {_num(f['client_id'])} "
                     f"(node {f['node_id']}) {f['kind']}: {f['message'][:120]}")
    return "\n".join(lines + _chain_lines(result["chain"]))


def _chain_lines(chain: dict[str, Any]) -> list[str]:
    """Each completed round's chain head and the final one: keep them outside the run
    directory (``fedpriv verify RUN_DIR --head H``)."""
    lines = [f"chain head after round {r}: {head}" for r, head in chain["rounds"].items()]
    lines.append(f"chain head: {chain['head']} ({chain['entries']} entries)")
    if chain["signature"] is not None:
        lines.append(f"signed: entry {chain['signature']['seq']} by Ed25519 key "
                     f"{chain['signature']['public_key']}")
    return lines


def _num(x: Any) -> str:
    if x is None:
        return "-"
    return x if isinstance(x, str) else f"{x:.3g}"
