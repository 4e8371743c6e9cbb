"""``fedpriv capacity`` and ``fedpriv compare`` in-process: exit codes, JSON, named errors."""

from __future__ import annotations

import math

import pytest
from cli_support import run_cli

import fedpriv.leakage as leakage
from fedpriv.commands.specs import parse_spec, spec_forms
from fedpriv.errors import InputError
from fedpriv.leakage.capacity import log_capacity_gaussian, log_capacity_vmf

GAUSSIAN_5 = ["--mechanism", "gaussian", "--dim", "5", "--noise-std", "1"]


def test_capacity_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "capacity", "--mechanism", "gaussian", "--dim", "13700",
                           "--noise-std", "1.0", "--json")  # fmt: skip
    assert code == 0
    assert out["log_capacity"] == pytest.approx(log_capacity_gaussian(13_700, 1.0, 1.0))
    assert out["capacity"] == pytest.approx(math.exp(out["log_capacity"]))
    assert out["threat_model"] == "record" and out["radius"] == 1.0


def test_capacity_batch_level_and_overflow(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "capacity", "--mechanism", "vmf", "--dim", "1e7",
                           "--kappa", "1e5", "--threat-model", "batch", "--batch-size", "64",
                           "--json")  # fmt: skip
    assert code == 0
    assert out["capacity"] == "inf"  # C overflows a double; log C does not
    assert out["log_capacity"] == pytest.approx(log_capacity_vmf(10**7, 1e5))
    assert out["threat_model"] == "batch" and out["radius"] is None


def test_capacity_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run_cli(capsys, "capacity", "--mechanism", "laplace", "--dim", "5",
                         "--laplace-scale", "0.5")  # fmt: skip
    assert code == 0


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--mechanism", "gaussian", "--dim", "0", "--noise-std", "1"], "--dim"),
        (["--mechanism", "gaussian", "--dim", "2.5", "--noise-std", "1"], "--dim"),
        ([*GAUSSIAN_5, "--radius", "-1"], "--radius"),
        (["--mechanism", "gaussian", "--dim", "5", "--noise-std", "0"], "--noise-std"),
        (["--mechanism", "gaussian", "--dim", "5"], "--noise-std"),
        (["--mechanism", "laplace", "--dim", "5", "--laplace-scale", "-2"], "--laplace-scale"),
        (["--mechanism", "vmf", "--dim", "5", "--kappa", "0"], "--kappa"),
        (["--mechanism", "vmf", "--dim", "1", "--kappa", "1"], "--dim"),
        (["--mechanism", "vmf", "--dim", "5"], "--kappa"),
        ([*GAUSSIAN_5, "--threat-model", "batch"], "--batch-size"),
        ([*GAUSSIAN_5, "--kappa", "2"], "--kappa"),
        (["--mechanism", "clip", "--dim", "5"], "--mechanism"),
    ],
)  # fmt: skip
def test_capacity_bad_flags_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    code, _, err = run_cli(capsys, "capacity", *argv, "--json")
    assert code == 2
    assert flag in err


def test_compare_json(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # noqa: ANN001
    figure = tmp_path / "cmp.png"
    code, out, _ = run_cli(capsys, "compare", "--a", "gaussian:mu=1", "--b", "laplace:mu=1",
                           "--plot", str(figure), "--json")  # fmt: skip
    assert code == 0
    for key in ("delta_ab", "delta_ba", "delta_sym", "tv_a", "tv_b", "rstar_a", "rstar_b"):
        assert isinstance(out[key], float)
    assert out["delta_sym"] == max(out["delta_ab"], out["delta_ba"])
    assert out["tv_a"] == pytest.approx(2 * 0.6914624612740131 - 1, abs=1e-6)
    assert figure.stat().st_size > 10_000 and out["plot"] == str(figure)


def test_compare_sigma_form_equals_mu_form(capsys: pytest.CaptureFixture[str]) -> None:
    _, first, _ = run_cli(capsys, "compare", "--a", "gaussian:sigma=0.5", "--b", "pp", "--json")
    _, second, _ = run_cli(capsys, "compare", "--a", "gaussian:mu=2", "--b", "pp", "--json")
    assert first["delta_ba"] == second["delta_ba"]


@pytest.mark.parametrize(
    ("a", "b", "flag", "hint"),
    [
        ("gauss:mu=1", "pp", "--a", "gaussian:mu=M"),
        ("gaussian:mu=-1", "pp", "--a", "mu a finite number >= 0"),
        ("gaussian:mu=1,sigma=2", "pp", "--a", "gaussian:sigma=V"),
        ("gaussian:mu=x", "pp", "--a", "a number for 'mu'"),
        ("gaussian:mu", "pp", "--a", "PARAM=VALUE"),
        ("pp", "vmf:kappa=1", "--b", "vmf:kappa=V,dim=V"),
        ("pp", "vmf:kappa=1,dim=1", "--b", "dim an integer >= 2"),
        ("pp", "subsampled-gaussian:sigma=1,q=2,steps=5", "--b", "q a sampling rate"),
        ("pp", "subsampled-laplace:scale=1,q=0.1,steps=2.5", "--b", "steps an integer"),
        ("pp", "laplace:mu=1,mu=2", "--b", "each once"),
    ],
)
def test_compare_bad_specs_exit_2(
    capsys: pytest.CaptureFixture[str], a: str, b: str, flag: str, hint: str
) -> None:
    code, _, err = run_cli(capsys, "compare", "--a", a, "--b", b, "--json")
    assert code == 2
    assert f"{flag} = " in err and hint in err


def test_compare_bad_plot_path_exit_2(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # noqa: ANN001
    code, _, err = run_cli(capsys, "compare", "--a", "pp", "--b", "bnp", "--plot",
                           str(tmp_path / "missing" / "x.png"))  # fmt: skip
    assert code == 2 and "--plot" in err
    code, _, err = run_cli(capsys, "compare", "--a", "pp", "--b", "bnp", "--plot",
                           str(tmp_path / "x.unknown"))  # fmt: skip
    assert code == 2 and "--plot" in err


def test_every_spec_form_parses_its_usage_example() -> None:
    examples = {
        "gaussian": "gaussian:mu=1", "laplace": "laplace:scale=2", "vmf": "vmf:kappa=100,dim=13700",
        "subsampled-gaussian": "subsampled-gaussian:sigma=1,q=0.01,steps=500",
        "subsampled-laplace": "subsampled-laplace:scale=1,q=0.01,steps=500",
        "subsampled-vmf": "subsampled-vmf:kappa=10,dim=50,q=0.1,steps=3", "pp": "pp", "bnp": "bnp",
    }  # fmt: skip
    assert set(examples) == set(spec_forms())
    for name, text in examples.items():
        spec = parse_spec(text, "--a")
        assert spec.name == name and spec.describe()["spec"] == text
    assert (
        parse_spec("subsampled-gaussian:sigma=1,q=0.01,steps=500", "--a").describe()["params"][
            "steps"
        ]
        == 500
    )
    with pytest.raises(InputError):
        parse_spec("", "--a")


def test_public_api_resolves() -> None:
    assert len(set(leakage.__all__)) == len(leakage.__all__)
    for name in leakage.__all__:
        assert getattr(leakage, name) is not None
