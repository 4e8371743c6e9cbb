"""Hostile config values and command-line flags: each exits 2 with one line naming the key,
flag or file and what is allowed, before any work (before Ray starts, before an attack runs,
before a directory is created), and changes nothing already written. Every case runs the real
command line in this process (:func:`tests.cli_support.run_cli`).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.cli_support import run_cli

PRESET = "configs/quickstart.toml"


def refused(capsys: pytest.CaptureFixture[str], key: str, *argv: str) -> str:
    """Run ``fedpriv ARGV``; assert exit 2 with one line naming ``key``; return the line."""
    code, _, err = run_cli(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"error: {key} = " in lines[0], lines[0]
    return lines[0]


def simulate_refused(capsys, tmp_path: Path, key: str, *sets: str) -> str:  # noqa: ANN001
    """``fedpriv simulate PRESET --set ... --out NEW`` exits 2 naming ``key``; NEW not made."""
    out = tmp_path / "run"
    argv = ["simulate", PRESET, "--out", str(out)]
    for text in sets:
        argv += ["--set", text]
    line = refused(capsys, key, *argv)
    assert not out.exists()
    return line


# 1. nesting

@pytest.mark.parametrize("depth", [40, 5000])  # past MAX_DEPTH; past the TOML parser's recursion
def test_deeply_nested_config_file(tmp_path, capsys, depth):
    config = tmp_path / "deep.toml"
    config.write_text("seed = 0\n[data]\nname = " + "[" * depth + "]" * depth + "\n")
    before = config.read_bytes()
    line = refused(capsys, "CONFIG" if depth > 1000 else "data", "simulate", str(config),
                   "--out", str(tmp_path / "run"))
    assert "at most 32 levels of nested tables and arrays" in line
    assert config.read_bytes() == before and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("audit.attacks=" + "[" * 5000 + "]" * 5000, "--set"),  # the parser's recursion
        ("data.name=" + "{a=" * 40 + "1" + "}" * 40, "data"),
        (".".join(["train"] * 3000) + "=1", "train"),  # a dotted key thousands deep
    ],
    ids=["array", "inline-table", "dotted-key"],
)
def test_deeply_nested_set_value(tmp_path, capsys, text, key):
    line = simulate_refused(capsys, tmp_path, key, text)
    assert "at most 32 levels of nested tables and arrays" in line and len(line) < 1200


# 2. the digits split

@pytest.mark.parametrize("fraction", ["1e-9", "0.9999"])
def test_test_fraction_the_split_cannot_hold(tmp_path, capsys, fraction):
    line = simulate_refused(capsys, tmp_path, "data.test_fraction",
                            f"data.test_fraction={fraction}")
    assert "at least 10 test and 10 train records of the 1,797" in line


def test_test_fraction_limits_are_what_the_split_holds():
    from fedpriv.data import load_dataset
    from fedpriv.errors import InputError

    # ceil(f·n) test records, n − ceil(f·n) train records, n = 1797: 10 and 1787 test records
    # leave 10 records (one per class) on the smaller side; 9 and 1788 do not
    for fraction in (9.5 / 1797, 1786.5 / 1797):
        data = load_dataset("digits", test_fraction=fraction)
        assert len(set(data.test_y.tolist())) == len(set(data.train_y.tolist())) == 10
    for fraction in (8.5 / 1797, 1787.5 / 1797):
        with pytest.raises(InputError, match="data.test_fraction"):
            load_dataset("digits", test_fraction=fraction)


# 3-4. numeric ranges: what the arithmetic downstream can hold

@pytest.mark.parametrize(
    ("sets", "key"),
    [
        (["mechanism.noise_multiplier=1e-300"], "mechanism.noise_multiplier"),
        (["mechanism.clip=1e308"], "mechanism.clip"),
        (["mechanism.clip=1e-320"], "mechanism.clip"),
        (["mechanism.clip_per_layer=[1.0, 1e300]"], "mechanism.clip_per_layer"),
        (['mechanism.name="vmf"', "mechanism.vmf_scale=1e308"], "mechanism.vmf_scale"),
        (['mechanism.name="laplace"', "mechanism.laplace_scale=1e-300"],
         "mechanism.laplace_scale"),
    ],
    ids=["sigma", "clip-huge", "clip-tiny", "clip-per-layer", "vmf-scale", "laplace"],
)
def test_scales_outside_the_float32_range(tmp_path, capsys, sets, key):
    simulate_refused(capsys, tmp_path, key, *sets)


def test_accepted_scales_stay_finite_and_nonzero_in_float32():
    """The extremes of what the mechanisms accept: σ·C (and λ·C) on the float32 sum, ten
    standard deviations of it squared and summed over 10⁷ coordinates, stay finite, and the
    noise never rounds to 0."""
    from fedpriv.mechanisms.base import CLIP_RANGE, MAX_NOISE, MIN_NOISE

    f32 = np.finfo(np.float32)
    for scale in (MIN_NOISE * CLIP_RANGE[0], MAX_NOISE * CLIP_RANGE[1]):
        assert np.float32(scale) >= f32.tiny
        assert np.isfinite(np.float32((10 * scale) ** 2 * 1e7))


@pytest.mark.parametrize(
    ("sets", "key", "reason"),
    [
        (['mechanism.name="laplace"', "mechanism.laplace_scale=0.001", 'audit.accountant="pld"'],
         "mechanism.laplace_scale", "the Laplace PLD's numeric range"),
        (['mechanism.name="vmf"', "mechanism.kappa=1e-300", 'audit.accountant="pld"'],
         "mechanism.kappa", "IndexError"),  # dp-accounting's own arithmetic, not a range check
        (["rounds=1000000", "train.local_steps=100000", 'audit.accountant="pld"'],
         "rounds", "use the RDP accountant"),
    ],
    ids=["laplace-pld", "vmf-pld", "steps-pld"],
)
def test_what_the_accountant_cannot_account(tmp_path, capsys, sets, key, reason):
    line = simulate_refused(capsys, tmp_path, key, *sets)
    assert "accountant can account over" in line and reason in line


def test_accountant_failure_names_the_override_that_set_it(tmp_path, capsys):
    line = simulate_refused(
        capsys, tmp_path, "mechanism.overrides[0].laplace_scale", 'audit.accountant="pld"',
        'mechanism.overrides=[{clients=[3], name="laplace", laplace_scale=0.001}]',
    )
    assert "client 3" in line


def test_budget_alone_is_accounted_before_the_run(tmp_path, capsys):
    """With auditing off, a client with an ε budget still accounts its rounds (in the client):
    the pre-run check accounts them too."""
    simulate_refused(capsys, tmp_path, "mechanism.laplace_scale", "audit.enabled=false",
                     'mechanism.name="laplace"', "mechanism.laplace_scale=0.001",
                     'audit.accountant="pld"', "mechanism.epsilon_budget=10.0")


# 5. Ray's resources

def test_client_cpus_beyond_the_private_ray(tmp_path, capsys):
    line = simulate_refused(capsys, tmp_path, "simulation.client_cpus",
                            "simulation.client_cpus=4", "simulation.ray_cpus=2")
    assert "at most simulation.ray_cpus = 2" in line
    simulate_refused(capsys, tmp_path, "simulation.client_cpus", "simulation.client_cpus=1e-5")


def test_client_cpus_with_a_cluster_is_the_cluster_s_business():
    from workflows.config import load_config

    cfg = load_config(PRESET, ["simulation.client_cpus=4", 'simulation.ray_address="auto"'])
    assert cfg.simulation.client_cpus == 4.0


# 6. where a run may be written

def test_out_under_a_file(tmp_path, capsys):
    parent = tmp_path / "file"
    parent.write_text("mine")
    line = refused(capsys, "--out", "simulate", PRESET, "--out", str(parent / "run"))
    assert f"{parent} is a file" in line and parent.read_text() == "mine"


@pytest.mark.parametrize("out", ["/proc/fedpriv-run", "/sys/kernel/fedpriv/run"])
def test_out_in_a_pseudo_file_system(capsys, out):
    if not Path(out).parent.parent.exists():
        pytest.skip(f"no {Path(out).parent.parent} here")
    line = refused(capsys, "--out", "simulate", PRESET, "--out", out)
    assert "a path under a writable directory" in line and not Path(out).exists()


def test_out_on_a_read_only_file_system(tmp_path, capsys):
    """A read-only tmpfs mounted for the test where it can mount one (root with
    CAP_SYS_ADMIN); else a directory of mode 0500 (root ignores permission bits: then
    /proc/sys, which refuses new entries)."""
    target = tmp_path / "ro"
    target.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(target)],
        capture_output=True, check=False,
    ).returncode == 0
    out = target / "a" / "run"
    try:
        if not mounted and os.geteuid() != 0:
            target.chmod(0o500)
        elif not mounted:
            out = Path("/proc/sys/fedpriv/run")
        line = refused(capsys, "--out", "simulate", PRESET, "--out", str(out))
        assert "a path under a writable directory" in line and not out.parent.exists()
    finally:
        if mounted:
            subprocess.run(["umount", str(target)], check=True)
        target.chmod(0o700)


# 7-8. audit flags

@pytest.mark.parametrize("ids", ["\u00b2", "1,\u00b2", "12345678901234567890123", "1000000", ""])
def test_audit_clients_ascii_and_bounded(tmp_path, capsys, ids):
    line = refused(capsys, "--clients", "audit", str(tmp_path), "--clients", ids)
    assert "client ids in [0, 999,999]" in line


@pytest.mark.parametrize("rounds", ["\u0663", "99999999999999999999999", "1:1000001"])
def test_audit_rounds_ascii_and_bounded(tmp_path, capsys, rounds):
    refused(capsys, "--rounds", "audit", str(tmp_path), "--rounds", rounds)


def test_audit_iterations_names_the_flag_and_the_documented_bound(tmp_path, capsys):
    from attacks.registry import check_attack
    from fedpriv.audit.config import MAX_ITERATIONS
    from fedpriv.errors import InputError

    line = refused(capsys, "--iterations", "audit", str(tmp_path), "--iterations", "1000001")
    assert "in [1, 1,000,000]" in line and "attack." not in line
    assert MAX_ITERATIONS == 10**6  # docs/trust.md §5 says so
    trust = (Path(__file__).parents[1] / "docs" / "trust.md").read_text(encoding="utf-8")
    assert "attack iterations ≤ 10⁶" in trust
    with pytest.raises(InputError, match=re.escape("[1, 1,000,000]")):
        check_attack("iga", MAX_ITERATIONS + 1, 1, 0, None, {})


# 9. report --out

def _store(run_dir: Path) -> None:
    from fedpriv.audit import AuditStore

    with AuditStore.create(run_dir, {}, seed=0) as store:
        store.begin_round(1)
        store.write_update(1, 0, [np.ones(4)], {"mechanism": "gaussian"})
        store.complete_round(1)


def test_report_out_into_an_empty_directory_makes_it_private(tmp_path, capsys):
    _store(tmp_path / "run")
    out = tmp_path / "mine"
    out.mkdir(mode=0o755)
    out.chmod(0o755)
    code, _, err = run_cli(capsys, "report", str(tmp_path / "run"), "--out", str(out))
    assert code == 0, err
    assert out.stat().st_mode & 0o777 == 0o700 and (out / "report.json").is_file()
    code, _, err = run_cli(capsys, "report", str(tmp_path / "run"), "--out", str(out))
    assert code == 0, err  # again: its own report of this run


def test_report_out_beside_others_files_is_refused(tmp_path, capsys):
    _store(tmp_path / "run")
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o755)
    (out / "notes.txt").write_text("theirs")
    line = refused(capsys, "--out", "report", str(tmp_path / "run"), "--out", str(out))
    assert "a new or empty directory" in line
    assert out.stat().st_mode & 0o777 == 0o755 and sorted(os.listdir(out)) == ["notes.txt"]
