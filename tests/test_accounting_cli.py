"""``fedpriv account``: the JSON contract, exit code 2 naming the flag, and a light import."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from workflows.cli.main import main

VMF = ["account", "--mechanism", "vmf", "--kappa", "58.6", "--dim", "13700",
       "--sample-rate", "0.0021333", "--delta", "1e-5"]
KEYS = {"epsilon", "delta", "accountant", "route", "optimal_order", "kappa", "steps",
        "sample_rate", "compose", "warnings", "neighbouring", "unit"}


def _run(argv: list[str], capsys) -> tuple[int, dict | None, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 and "--json" in argv else None), err


def test_vmf_json_contract(capsys) -> None:
    code, out, _ = _run([*VMF, "--steps", "1e5", "--json"], capsys)
    assert code == 0 and KEYS <= out.keys()
    assert out["steps"] == 100_000 and out["accountant"] == "tightest"
    assert out["route"] in ("rdp", "approach1", "pld")
    assert out["neighbouring"] == "add-remove" and out["compose"] == "per-step"
    assert out["epsilon"] == min(out["routes"].values())


def test_epochs_give_ceil_of_epochs_over_rate(capsys) -> None:
    code, out, _ = _run([*VMF, "--epochs", "2", "--json"], capsys)
    assert code == 0 and out["steps"] == math.ceil(2 / 0.0021333)


def test_per_epoch_warns_in_json_and_on_stderr(capsys, caplog) -> None:
    code, out, err = _run([*VMF, "--epochs", "2", "--compose", "per-epoch", "--json"], capsys)
    assert code == 0 and out["steps"] == 2
    assert "UNDERSTATES" in out["warnings"][0]
    assert "UNDERSTATES" in err + caplog.text


def test_calibration_json(capsys) -> None:
    argv = ["account", "--mechanism", "laplace", "--sample-rate", "0.01", "--steps", "1000",
            "--delta", "1e-5", "--target-epsilon", "2", "--json"]
    code, out, _ = _run(argv, capsys)
    assert code == 0 and out["calibrated"] and out["epsilon"] <= 2.0
    assert out["laplace_scale"] > 0


def test_human_rendering(capsys) -> None:
    code, _, _ = _run([*VMF, "--steps", "100"], capsys)
    assert code == 0


BAD = [
    (["--sample-rate", "0"], "--sample-rate"),
    (["--sample-rate", "1.5"], "--sample-rate"),
    (["--delta", "0"], "--delta"),
    (["--delta", "1"], "--delta"),
    (["--kappa", "0"], "--kappa"),
    (["--kappa", "-2"], "--kappa"),
    (["--steps", "0"], "--steps"),
    (["--steps", "2.5"], "--steps"),
    (["--dim", "0"], "--dim"),
    (["--dim", "-3"], "--dim"),
    (["--noise-multiplier", "1"], "--noise-multiplier"),
    (["--target-epsilon", "1"], "--target-epsilon"),
    (["--target-epsilon", "-1", "--kappa", None], "--target-epsilon"),
    (["--accountant", "pld", "--route", "rdp"], "--route"),
    (["--compose", "per-epoch"], "--compose"),
    (["--epochs", "2"], "--steps"),
]


def _argv(change: list) -> list[str]:
    """The valid VMF call with --steps 10, then the flags in ``change`` set (None: removed)."""
    base = dict(zip(VMF[3::2], VMF[4::2], strict=True)) | {"--steps": "10"}
    for flag, value in zip(change[::2], change[1::2], strict=True):
        base[flag] = value
    return ["account", "--mechanism", "vmf",
            *[x for k, v in base.items() if v is not None for x in (k, v)]]


@pytest.mark.parametrize(("change", "flag"), BAD)
def test_bad_input_exits_2_naming_the_flag(change: list, flag: str, capsys) -> None:
    code, _, err = _run(_argv(change), capsys)
    assert code == 2
    assert flag in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["--mechanism", "gaussian", "--sample-rate", "0.1", "--steps", "5", "--delta", "1e-5"],
      "--noise-multiplier"),
     (["--mechanism", "gaussian", "--noise-multiplier", "-1", "--sample-rate", "0.1", "--steps",
       "5", "--delta", "1e-5"], "--noise-multiplier"),
     (["--mechanism", "vmf", "--kappa", "3", "--sample-rate", "0.1", "--steps", "5", "--delta",
       "1e-5"], "--dim"),
     (["--mechanism", "laplace", "--laplace-scale", "0", "--sample-rate", "0.1", "--steps", "5",
       "--delta", "1e-5"], "--laplace-scale")],
)
def test_missing_or_bad_parameter(argv: list[str], flag: str, capsys) -> None:
    code, _, err = _run(["account", *argv], capsys)
    assert code == 2 and flag in err


def test_unparsable_value_is_an_argparse_error_naming_the_flag(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(_argv(["--sample-rate", "abc"]))
    assert exc.value.code == 2 and "--sample-rate" in capsys.readouterr().err


def test_vmf_rdp_path_imports_neither_torch_nor_dp_accounting() -> None:
    code = (
        "import sys\n"
        "from fedpriv.commands.account import account\n"
        "account('vmf', kappa=58.6, dim=13700, sample_rate=0.0021333, steps=100000, delta=1e-5,"
        " accountant='rdp')\n"
        "print(sorted(m for m in ('torch', 'dp_accounting') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
