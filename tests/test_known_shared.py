"""What a round's replies share of the server's checks (issue 37) is computed once, and each
reply still gets the checks of its own values: :class:`strategies.identity.KnownChecks` over a
mixed batch — mechanism overrides, cheats on settings and size, reports read back from the
wire — equals, reply by reply, the checks computed from scratch: the settings verdict against
the report its instructions give (:func:`fedpriv.instructions.instructed_report`,
:func:`~fedpriv.instructions.settings_verdict`), the size verdict
(:func:`~fedpriv.instructions.size_verdict`) and the identity verdict."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fedpriv.instructions import (
    SettingsVerdicts,
    instructed_report,
    settings_key,
    settings_verdict,
    size_verdict,
)
from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.protocol import ClientReport
from strategies.identity import ENGINE, KnownChecks, NodeBinding
from workflows.config import load_config

MIXED = Path(__file__).resolve().parents[1] / "configs" / "mixed-mechanisms.toml"


def _batch(cfg) -> list[tuple[int, ClientReport]]:
    """``(node, report)`` of a round: honest clients of every override, and cheats."""
    out = []
    for cid in range(10):
        honest = instructed_report(cfg, cid, 3, 60)
        out.append((100 + cid, ClientReport.from_config(honest.to_config())))  # off the wire
    base = instructed_report(cfg, 8, 3, 60)
    wire = base.to_config()
    out += [
        (200, dataclasses.replace(base, lr=base.lr * 0.1)),
        (201, dataclasses.replace(base, lr=base.lr * 0.5)),  # same field, another value
        (202, dataclasses.replace(base, local_examples=10**9, sample_rate=32 / 10**9)),
        (203, dataclasses.replace(base, local_steps=1)),
        (204, dataclasses.replace(base, optimizer=OptimizerSettings("adam"))),
        (205, ClientReport.from_config({**wire, "mechanism-params": '{"clip": 1.0, '
                                        '"noise_multiplier": -0.0}'})),
        (206, ClientReport.from_config({**wire, "mechanism-params": '{"clip": 1.0, '
                                        '"noise_multiplier": 0.0}'})),
        (207, dataclasses.replace(instructed_report(cfg, 0, 3, 60), partition_id=8)),
        (208, dataclasses.replace(base, server_round=2)),
        (209, ClientReport.from_config(wire)),
    ]
    return out


def test_a_rounds_known_checks_are_each_replys_own():
    cfg = load_config(MIXED, [])
    sizes = {cid: 60 for cid in range(10)}
    for binding in (NodeBinding({}, sizes, ENGINE), NodeBinding()):
        checks = KnownChecks(cfg, binding, 3)
        for node, report in _batch(cfg):
            cid, known = report.partition_id, binding.sizes.get(report.partition_id)
            sent = instructed_report(cfg, cid, 3, report.local_examples if known is None
                                     else known)
            expected = [settings_verdict(sent, report),
                        size_verdict(known, report, f"the {binding.source}"),
                        binding.identity_verdict(node, cid)]
            assert checks(node, report) == expected, (node, report)
    checks = KnownChecks(cfg, NodeBinding({}, sizes, ENGINE), 3)
    found = [[c.status for c in checks(node, report)] for node, report in _batch(cfg)]
    settings, size = [f[0] for f in found], [f[1] for f in found]
    assert settings == ["consistent"] * 10 + ["inconsistent"] * 2 + ["consistent"] + [
        "inconsistent"] * 6 + ["consistent"]
    assert size == ["consistent"] * 12 + ["inconsistent"] + ["consistent"] * 7
    zero = [checks(node, r)[0].reason for node, r in _batch(cfg) if node in (205, 206)]
    assert "declared -0.0" in zero[0] and "declared 0.0" in zero[1]  # each reply's own value


def test_settings_verdicts_are_computed_once_per_distinct_pair(monkeypatch):
    cfg = load_config(MIXED, [])
    calls = []

    def counting(sent, declared):
        calls.append(declared.partition_id)
        return settings_verdict(sent, declared)

    monkeypatch.setattr("fedpriv.instructions.settings_verdict", counting)
    sent = instructed_report(cfg, 8, 3, 60)
    verdicts = SettingsVerdicts()
    for cid in (8, 9, 8):
        honest = ClientReport.from_config({**sent.to_config(), "partition-id": cid})
        assert verdicts(sent, honest, settings_key(sent)).status == "consistent"
    cheat = dataclasses.replace(sent, lr=0.5)
    assert verdicts(sent, cheat, settings_key(sent)).status == "inconsistent"
    assert verdicts(sent, cheat, settings_key(sent)).status == "inconsistent"
    assert calls == [8, 8, 8]  # the honest pair once; an inconsistent verdict every time
