"""Fuzzed config values and command-line flags: any input either passes every check that runs
before work, or exits 2 with one line — never a traceback, exit 1, or a hang.

``fedpriv simulate`` runs for real up to the point where the run would start: the config, the
flags, the run directory and :func:`workflows.simulation.check_runnable` (data, partition,
model, mechanisms, accountant); only opening the store and starting Ray are replaced, by a
stand-in that reports the run as validated. ``fedpriv audit`` and ``fedpriv report`` get
fuzzed flags on a directory with no store: their flags are checked before the store is read.
Derandomised (a fixed sequence of examples), so CI sees the same inputs every time.
"""

from __future__ import annotations

import math
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies.server_run
from tests.cli_support import run_cli

PRESET = "configs/quickstart.toml"
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

# Numbers at the edges of what IEEE doubles, int64 and the checks hold.
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-320, 1e-300, 1e-9, 1e-4, 0.5, 0.9999, 1.0, 2.0, 1e6, 1e308]),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, 2, 4, 10**6, 10**7, 2**63, 10**22]),
)
values = st.one_of(numbers, st.booleans(), st.text(max_size=12),
                   st.lists(numbers, max_size=3), st.recursive(
                       st.integers(0, 3), lambda inner: st.lists(inner, max_size=2), max_leaves=8))
KEYS = [
    "seed", "rounds", "device", "data.name", "data.num_clients", "data.test_fraction",
    "data.partition", "data.dirichlet_alpha", "train.batch_size", "train.lr",
    "train.local_steps", "train.optimizer", "mechanism.name", "mechanism.clip",
    "mechanism.noise_multiplier", "mechanism.laplace_scale", "mechanism.kappa",
    "mechanism.vmf_scale", "mechanism.clip_per_layer", "mechanism.epsilon_budget",
    "audit.delta", "audit.every", "audit.clients", "audit.iterations", "audit.canaries.enabled",
    "audit.canaries.count", "simulation.ray_cpus", "simulation.client_cpus", "unknown.key",
]


def _toml(value: object) -> str:
    """``value`` as the TOML text of a ``--set`` value (a string stays a bare string: the
    command line takes what is not TOML as text)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "nan" if math.isnan(value) else {math.inf: "inf", -math.inf: "-inf"}.get(
            value, repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


# Values of the right type at any magnitude: they pass the type checks and reach the checks
# of what the arithmetic downstream holds (the split, σ·C in float32, the accountant, Ray).
FLOAT_KEYS = ["data.test_fraction", "data.dirichlet_alpha", "train.lr", "mechanism.clip",
              "mechanism.noise_multiplier", "mechanism.laplace_scale", "mechanism.kappa",
              "mechanism.vmf_scale", "mechanism.epsilon_budget", "audit.delta",
              "simulation.client_cpus"]
INT_KEYS = ["rounds", "data.num_clients", "train.batch_size", "train.local_steps", "audit.every",
            "simulation.ray_cpus"]
magnitudes = st.one_of(st.floats(5e-324, 1e308), st.sampled_from([5e-324, 1e-300, 1e-9, 0.9999]))
typed = st.one_of(
    st.tuples(st.sampled_from(FLOAT_KEYS), magnitudes),
    st.tuples(st.sampled_from(INT_KEYS), st.integers(1, 10**7)),
    st.tuples(st.just("mechanism.name"), st.sampled_from(
        ['"gaussian"', '"laplace"', '"vmf"', '"clip"', '"none"'])),
)
overrides = st.lists(st.one_of(st.tuples(st.sampled_from(KEYS), values), typed, typed),
                     max_size=4)


def _exits_cleanly(code: int, err: str) -> None:
    lines = err.strip().splitlines()
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert len(lines) == 1 and " is not allowed: expected " in lines[0], err


@FUZZ
@given(sets=overrides)
def test_simulate_config_values(tmp_path_factory, capsys, sets):
    out = tmp_path_factory.mktemp("fuzz") / "run"
    argv = ["simulate", PRESET, "--out", str(out), "--json"]
    for key, value in sets:
        argv += ["--set", f"{key}={_toml(value)}"]
    with mock.patch.object(strategies.server_run, "open_run", _validated_store), \
            mock.patch.object(strategies.server_run, "run_federation", _validated_run):
        code, report, err = run_cli(capsys, *argv)
    _exits_cleanly(code, err)
    assert code == 2 or report == {"validated": True}
    assert not out.exists()  # nothing is written before the run starts


def _validated_store(cfg, run_dir, resume):  # noqa: ANN001, ANN202 - open_run's stand-in
    return None, cfg.rounds  # "every round done": simulate() then skips Ray


def _validated_run(grid, cfg, run_dir, **kwargs):  # noqa: ANN001, ANN003, ANN202
    return {"validated": True}


flag_text = st.one_of(
    st.text(max_size=8),
    st.text(alphabet="0123456789:,-\u00b2\u0663 ", max_size=30),
    st.integers(-(10**30), 10**30).map(str),
)


@FUZZ
@given(clients=flag_text, rounds=flag_text, iterations=flag_text)
def test_audit_flags(tmp_path_factory, capsys, clients, rounds, iterations):
    empty = tmp_path_factory.mktemp("audit")
    code, _, err = run_cli(capsys, "audit", str(empty), f"--clients={clients}",
                           f"--rounds={rounds}", f"--iterations={iterations}")
    assert code == 2 and "Traceback" not in err  # no store here: refused either way
    assert len(err.strip().splitlines()) == 1, err


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import numpy as np

    from fedpriv.audit import AuditStore

    run_dir = tmp_path_factory.mktemp("stored") / "run"
    with AuditStore.create(run_dir, {}, seed=0) as store:
        store.begin_round(1)
        store.write_update(1, 0, [np.ones(4)], {"mechanism": "gaussian"})
        store.complete_round(1)
    return run_dir


@FUZZ
@given(name=st.text(alphabet=st.characters(blacklist_characters="/"), max_size=12),
       hostile=st.sampled_from([None, "/proc/x", "/sys/x/y", "/dev/null", "/dev/null/x"]),
       interval=flag_text)
def test_report_flags(stored_run, tmp_path_factory, capsys, name, hostile, interval):
    out = hostile or str(tmp_path_factory.mktemp("out") / name)
    code, _, err = run_cli(capsys, "report", str(stored_run), f"--out={out}",
                           f"--interval={interval}")
    assert code in (0, 2) and "Traceback" not in err, err
    assert code == 0 or len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv", [["--iterations", "many"], ["--executor", "gpu"], ["--bogus"]])
def test_usage_errors_are_one_line(tmp_path, capsys, argv):
    code, _, err = run_cli(capsys, "audit", str(tmp_path), *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert ": error: " in err and " --help)" in err
