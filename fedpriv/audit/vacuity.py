"""When a reported bound says nothing: the range of each bounded quantity, and the reason a
bound beyond it is vacuous (the report marks it instead of printing a meaningless number).

* **ABP.** An ABP value is the square-rooted Jensen–Shannon divergence of the attacker's
  posterior from the prior (natural log), at most ``sqrt(log 2)`` ≈ 0.833
  (``fedpriv.leakage.bayesian.abp_bound``); a bound above it (the Laplace clients' bound
  reads 1.5e18) bounds nothing.
* **log Bayes capacity.** ``log C`` bounds the multiplicative leakage over any prior
  (privacy-math.md §5); over a finite secret set 𝒳 no channel leaks more than ``log |𝒳|``
  (the posterior vulnerability is at most 1, the uniform prior's is ``1/|𝒳|``). The secret is
  one record (image and label) at record level and a batch of ``L`` records at batch level;
  stored as 8-bit images, ``|𝒳| ≤ (256^pixels · classes)^L``, so a ``log C`` above
  ``L·(pixels·log 256 + log classes)`` nats is vacuous.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["ABP_MAX", "VACUOUS_MARK", "log_secret_space", "terminal_marks", "vacuous_bounds"]

#: The largest ABP value: sqrt(log 2), the square root of the largest JS divergence (nats).
ABP_MAX = math.sqrt(math.log(2.0))


def log_secret_space(config: Mapping[str, Any]) -> tuple[float, str] | None:
    """An upper bound on ``log |𝒳|`` (nats) for the run's secret, and what it counts; None
    for a data set of unknown shape."""
    from fedpriv.data import SHAPES  # imports torch: only when a report is built

    name = (config.get("data") or {}).get("name")
    if name not in SHAPES:
        return None
    (channels, height, width), classes = SHAPES[name]
    pixels = channels * height * width
    threat = (config.get("audit") or {}).get("threat_model", "record")
    records = int((config.get("train") or {}).get("batch_size", 1)) if threat == "batch" else 1
    value = records * (pixels * math.log(256.0) + math.log(classes))
    what = (f"{'a batch of ' + str(records) + ' records' if records > 1 else 'one record'}: "
            f"8-bit {channels}×{height}×{width} image(s) and label(s)")
    return value, what


def _number(value: Any) -> float | None:
    if value == "inf":
        return math.inf
    return float(value) if isinstance(value, int | float) else None


def vacuous_bounds(client: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, str]:
    """The client's bounds that lie beyond their quantity's range, each with the reason:
    ``abp_bound`` and ``log_bayes_capacity`` (module docstring). An infinite value is no
    bound at all (the report says ∞), not a vacuous one, and is left out."""
    out = {}
    abp = _number(client.get("abp_bound"))
    if abp is not None and ABP_MAX < abp < math.inf:
        out["abp_bound"] = (f"vacuous: an ABP value is at most √log 2 ≈ {ABP_MAX:.3f}; the "
                            f"bound {abp:.3g} exceeds it")
    space = log_secret_space(config)
    log_c = _number(client.get("log_bayes_capacity"))
    if space is not None and log_c is not None and space[0] < log_c < math.inf:
        out["log_bayes_capacity"] = (
            f"vacuous: no release leaks more than log |secret space| ≤ {space[0]:,.0f} nats "
            f"({space[1]}); log C = {log_c:,.4g} nats exceeds it")
    return out


VACUOUS_MARK = "*"
"""What a terminal table appends to a vacuous bound (report.html marks it in words)."""


def terminal_marks(clients: list[Mapping[str, Any]], key: str) -> tuple[list[str], list[str]]:
    """Per client, :data:`VACUOUS_MARK` where its ``key`` is vacuous (else ``""``), and the
    footnote a table that printed a mark ends with (none when nothing was marked): a terminal
    summary states what the page states, never a bare number that bounds nothing."""
    marks = [VACUOUS_MARK if key in (c.get("vacuous") or {}) else "" for c in clients]
    if not any(marks):
        return marks, []
    reason = next(c["vacuous"][key] for c in clients if key in (c.get("vacuous") or {}))
    limit = reason.rpartition("; ")[0] or reason  # the range, without one client's value
    return marks, [f"{VACUOUS_MARK} {limit}: a larger value bounds nothing "
                   "(report.json: vacuous)"]
