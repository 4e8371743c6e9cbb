"""``fedpriv compare --compose``: functionals, Theorem 3 beside the exact Δ, refusals (exit 2)."""

from __future__ import annotations

import pytest
from cli_support import run_cli

from fedpriv.commands.compare import MAX_COMPOSE


def test_acceptance_gaussian_vs_laplace_composed_100(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", "--a", "gaussian:mu=1", "--b", "laplace:mu=1",
                           "--compose", "100", "--json")  # fmt: skip
    assert code == 0
    fa, fb = out["a"]["functionals"], out["b"]["functionals"]
    assert fa["v1"] == pytest.approx(0.5, rel=1e-5) and fa["eta"] == pytest.approx(0.5, rel=1e-5)
    assert fb["v1"] == pytest.approx(0.36787944117, rel=1e-5)  # mu - 1 + e^-mu at mu = 1
    theorem = out["theorem3"]
    assert theorem["applies"] and theorem["ab"]["holds"] and not theorem["ba"]["holds"]
    assert theorem["ab"]["threshold"] == pytest.approx(fb["eta"] ** 2 / fa["eta"] ** 2)
    assert theorem["ab"]["bound"] == pytest.approx(out["a"]["gamma"] + out["b"]["gamma"])
    assert theorem["ab"]["exact_delta"] == out["delta_ab"] <= theorem["ab"]["bound"]
    assert theorem["ba"]["bound"] is None and out["delta_ba"] > out["delta_ab"]
    assert out["a"]["compose"] == out["b"]["compose"] == 100


def test_compose_b_ratio_plot_and_human_output(
    capsys: pytest.CaptureFixture[str],
    tmp_path,  # noqa: ANN001
) -> None:
    figure = tmp_path / "composition.png"
    code, _, _ = run_cli(capsys, "compare", "--a", "gaussian:mu=0.5", "--b", "laplace:mu=0.8",
                         "--compose", "8", "--compose-b", "4", "--plot", str(figure))  # fmt: skip
    assert code == 0
    assert figure.stat().st_size > 10_000


def test_subsampled_release_is_asymmetric_no_bound(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", "--a", "subsampled-gaussian:sigma=1,q=0.2,steps=1",
                           "--b", "gaussian:sigma=2", "--compose", "10", "--json")  # fmt: skip
    assert code == 0
    assert out["a"]["symmetric"] is False and out["a"]["functionals_add"] is not None
    assert out["a"]["gamma"] is None and out["b"]["symmetric"] is True
    assert out["theorem3"]["applies"] is False and "symmetric" in out["theorem3"]["reason"]


@pytest.mark.parametrize(
    ("argv", "flag", "hint"),
    [
        (["--a", "subsampled-gaussian:sigma=1,q=0.1,steps=5", "--b", "gaussian:mu=1",
          "--compose", "3"], "--a", "steps=1 with --compose"),
        (["--a", "gaussian:mu=1", "--b", "pp", "--compose", "3"], "--b", "fixed points"),
        (["--a", "gaussian:mu=0", "--b", "laplace:mu=1", "--compose", "3"], "--a", "mu > 0"),
        (["--a", "gaussian:mu=1", "--b", "laplace:mu=1", "--compose-b", "3"], "--compose-b",
         "only together with --compose"),
        (["--a", "gaussian:mu=1", "--b", "laplace:mu=1", "--compose", "0"], "--compose", ">= 1"),
        (["--a", "gaussian:mu=1", "--b", "laplace:mu=1", "--compose", "2.5"], "--compose",
         "integer"),
        (["--a", "gaussian:mu=1", "--b", "laplace:mu=1", "--compose", str(MAX_COMPOSE + 1)],
         "--compose", "[1, 1,000,000]"),
        (["--a", "gaussian:mu=1", "--b", "laplace:mu=1", "--compose", "1",
          "--compose-b", "900000"], "--compose-b", "loss values"),
        (["--a", "gaussian:mu=1e-4", "--b", "laplace:mu=1", "--compose", "3"], "--a",
         "standard deviation"),
    ],
)  # fmt: skip
def test_compose_refusals_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, hint: str
) -> None:
    code, _, err = run_cli(capsys, "compare", *argv, "--json")
    assert code == 2
    assert f"{flag} = " in err and hint in err
