"""The run report rebuilt from a synthetic store: contract keys, values, CSV, figures, CLI.

Expected values are computed here from the schedule the test writes, not from the code.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from fedpriv.audit import AuditStore, build_report, report_run
from workflows.cli.main import main

ROUNDS = 3
MECHANISMS = {
    0: ("gaussian", {"clip": 1.0, "noise_multiplier": 1.1}, True),
    1: ("vmf", {"clip": 1.0, "kappa": 50.0, "vmf_keep_norm": True}, False),
    2: ("laplace", {"clip": 1.0, "laplace_scale": 2.0}, True),
}
SSIMS = {
    (r, c): [0.1 * r + 0.01 * c, 0.05 * r + 0.3 * (c == 0)] for r in (1, 2, 3) for c in (0, 1, 2)
}
MBP = {(r, c): 0.2 * r + 0.1 * c for r in (1, 2, 3) for c in (0, 1, 2)}


def _participates(rnd, client):
    return not (client == 2 and rnd == 2)  # client 2 fails in round 2


def _images(seed, n=4):
    """Smooth blobs in [0, 1], shaped like the paper's 16x16 grey inputs (flattened)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:16, 0:16]
    centres = rng.uniform(4, 12, size=(n, 2))
    blobs = np.exp(-((y - centres[:, :1, None]) ** 2 + (x - centres[:, 1:, None]) ** 2) / 12)
    return blobs.reshape(n, 256)


PRIOR_SSIM = 0.3


def _write_round(store, rnd, rng):
    store.begin_round(rnd)
    store.write_global(rnd, [rng.normal(size=(50, 256)), rng.normal(size=(10, 50))])
    for client, (name, params, formal) in MECHANISMS.items():
        if not _participates(rnd, client):
            store.write_update(rnd, client, None, {"status": "failed", "error": "timeout"})
            store.record_failure(rnd, "timeout", "no reply in 60 s", client_id=client)
            continue
        meta = {"mechanism": name, "mechanism_params": params, "formal_guarantee": formal,
                "local_steps": 1, "num_examples": 32}  # fmt: skip
        store.write_update(rnd, client, [rng.normal(size=(50, 256))], meta)
        truth = _images(100 * rnd + client)
        store.write_ground_truth(
            rnd, client, [10 * client + i for i in range(4)], {"images": truth}
        )
        for k, ssim in enumerate(SSIMS[rnd, client]):
            recon = np.clip(truth + rng.normal(scale=0.3 * (1 - ssim), size=truth.shape), 0, 1)
            result = {"attack": ("iga", "dlg")[k], "ssim": ssim, "mse": 1 - ssim, "psnr": 10.0,
                      "label_accuracy": 1.0, "relative_leakage": ssim / 2,
                      "prior": {"baseline": "mean", "ssim": PRIOR_SSIM, "psnr": 9.0, "mse": 0.1},
                      "gain_ssim": ssim - PRIOR_SSIM, "gain_psnr": 1.0}  # fmt: skip
            store.write_attack(rnd, client, result, {"images": recon})
        store.write_tally(rnd, client, {
            "epsilon": 0.5 * rnd, "delta": 1e-5, "accountant": "pld", "route": "rdp",
            "log_capacity_round": 1.0, "log_capacity_cumulative": 1.0 * rnd,
            "threat_model": "record", "mbp_bound": math.inf if name == "gaussian" else 4.0,
            "abp_bound": 2.0, "mbp_estimate": MBP[rnd, client], "abp_estimate": 0.01 * rnd,
        })  # fmt: skip
    store.record_failure(rnd, "lost-node", "node vanished", node_id=2**63 + rnd)
    store.complete_round(rnd, {"accuracy": 0.1 * rnd, "loss": 2.0 / rnd})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("report") / "run"
    rng = np.random.default_rng(5)
    with AuditStore.create(run_dir, {"rounds": ROUNDS + 1, "mechanism": "mixed"}, seed=5) as s:
        for rnd in range(1, ROUNDS + 1):
            _write_round(s, rnd, rng)
        s.begin_round(ROUNDS + 1)  # killed during round 4: ignored by the report
        s.write_update(ROUNDS + 1, 0, [np.ones(3)], {"mechanism": "none"})
        s.write_attack(ROUNDS + 1, 0, {"attack": "iga", "ssim": 0.99})
    return run_dir


@pytest.fixture(scope="module")
def report(run_dir):
    return report_run(run_dir)


def test_contract_keys(report):
    contract = {"run_dir", "rounds", "accuracy", "clients", "wall_seconds"}
    brief = {"loss", "failures", "config"}
    assert contract | brief <= set(report)
    client_keys = {
        "client_id", "mechanism", "mechanism_params", "formal_guarantee", "rounds_participated",
        "epsilon", "delta", "accountant", "log_bayes_capacity", "threat_model", "mbp_bound",
        "abp_bound", "mbp_estimate", "abp_estimate", "attack", "failures", "per_round",
    }  # fmt: skip
    attack_keys = {"mse", "psnr", "ssim", "name", "round", "label_accuracy", "relative_leakage"}
    for client in report["clients"]:
        assert client_keys <= set(client)
        assert attack_keys <= set(client["attack"])


def test_rounds_and_server_metrics(report, run_dir):
    assert report["run_dir"] == str(run_dir)
    assert report["rounds"] == ROUNDS and report["completed_rounds"] == [1, 2, 3]
    assert report["incomplete_rounds"] == [ROUNDS + 1]
    assert report["accuracy"] == pytest.approx([0.1, 0.2, 0.3])
    assert report["loss"] == pytest.approx([2.0, 1.0, 2.0 / 3])
    assert report["wall_seconds"] is None and report["status"] == "running"
    assert report["config"] == {"rounds": ROUNDS + 1, "mechanism": "mixed"}
    assert report["integrity"]["ok"]


def test_client_values(report):
    clients = {c["client_id"]: c for c in report["clients"]}
    assert sorted(clients) == [0, 1, 2]
    for cid, (name, params, formal) in MECHANISMS.items():
        c = clients[cid]
        assert (c["mechanism"], c["mechanism_params"], c["formal_guarantee"]) == (
            name,
            params,
            formal,
        )
        assert c["guarantee"] == ("declared" if formal else "none")  # no tally: not verified
        assert c["rounds_participated"] == sum(_participates(r, cid) for r in (1, 2, 3))
        assert (c["epsilon"], c["log_bayes_capacity"]) == (1.5, 3.0)  # after the last round
        assert c["mbp_estimate"] == pytest.approx(max(MBP[r, cid] for r in (1, 2, 3)))
        best = max(
            (s, r) for (r, k), ss in SSIMS.items() if k == cid for s in ss if _participates(r, k)
        )
        assert (c["attack"]["ssim"], c["attack"]["round"]) == pytest.approx(best)
        assert c["attack"]["relative_leakage"] == pytest.approx(best[0] / 2)
    assert clients[0]["mbp_bound"] == math.inf and clients[1]["mbp_bound"] == 4.0
    assert [f["kind"] for f in clients[2]["failures"]] == ["timeout"]
    assert [p["update_status"] for p in clients[2]["per_round"]] == ["ok", "failed", "ok"]
    assert [p["epsilon"] for p in clients[0]["per_round"]] == [0.5, 1.0, 1.5]
    assert {p["mbp_bound"] for p in clients[1]["per_round"] if p["epsilon"] is not None} == {4.0}


def test_failures(report):
    kinds = sorted((f["round"], f["kind"]) for f in report["failures"])
    assert kinds == [(1, "lost-node"), (2, "lost-node"), (2, "timeout"), (3, "lost-node")]
    lost = [f for f in report["failures"] if f["kind"] == "lost-node"]
    assert [f["node_id"] for f in lost] == [str(2**63 + r) for r in (1, 2, 3)]


def test_files(report, run_dir):
    on_disk = json.loads((run_dir / "report.json").read_text(), parse_constant=pytest.fail)
    assert on_disk["clients"][0]["mbp_bound"] == "inf"  # strict JSON
    assert on_disk["files"]["figures"] == [
        str(run_dir / f"reconstructions_round{r}.png") for r in (1, 2, 3)
    ]
    with (run_dir / "tallies.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    expected = [(r, c) for r in (1, 2, 3) for c in (0, 1, 2) if _participates(r, c)]
    assert [(int(row["round"]), int(row["client_id"])) for row in rows] == expected
    assert [float(row["epsilon"]) for row in rows] == [0.5 * r for r, _ in expected]
    assert {row["mbp_bound"] for row in rows if row["client_id"] == "0"} == {"inf"}
    for row in rows:  # the client-round's best attack against its prior
        best = max(SSIMS[int(row["round"]), int(row["client_id"])])
        assert float(row["attack_ssim"]) == pytest.approx(best)
        assert float(row["gain_ssim"]) == pytest.approx(best - PRIOR_SSIM)
        # the fixture's prior is stored as before the priors were named: "mean" reads as the
        # no-update prior, and the gain over it follows from the means
        assert (row["prior_baseline"], float(row["prior_ssim"])) == ("no_update", PRIOR_SSIM)
        assert float(row["no_update_gain_ssim"]) == pytest.approx(best - PRIOR_SSIM)
        assert row["identification_log_lower"] == ""  # not kept by such a store
    for client in on_disk["clients"]:
        attack = client["attack"]
        assert attack["gain"]["ssim"] == pytest.approx(attack["ssim"] - PRIOR_SSIM)
        assert attack["prior"]["baseline"] == "no_update"
        assert attack["no_update_prior"]["ssim"] == PRIOR_SSIM
        assert attack["no_update_gain"]["ssim"] == pytest.approx(attack["ssim"] - PRIOR_SSIM)
        assert attack["identification"] is None and attack["support_ssim"] is None
        assert {p["prior_ssim"] for p in client["per_round"] if p["ssim"] is not None} == {
            PRIOR_SSIM}
        assert "√log 2" in client["vacuous"]["abp_bound"]  # the fixture's ABP bound is 2
    from matplotlib.image import imread

    image = imread(run_dir / "reconstructions_round2.png")
    assert image.ndim == 3 and image.shape[0] > 400 and image.shape[1] > 400


def test_report_while_round_is_open_matches_build_report(run_dir, report):
    with AuditStore.open(run_dir, readonly=True) as store:
        again = build_report(store)
    assert again["clients"] == report["clients"] and "integrity" not in again


def test_cli_json_and_summary(run_dir, tmp_path, capsys):
    capsys.readouterr()
    assert main(["report", str(run_dir), "--json", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    printed = json.loads(out, parse_constant=pytest.fail)
    assert printed == json.loads((tmp_path / "out" / "report.json").read_text())
    assert printed["rounds"] == ROUNDS and len(printed["files"]["figures"]) == 3
    assert main(["report", str(run_dir), "--no-hashes", "--out", str(tmp_path / "out")]) == 0
    summary = capsys.readouterr().out
    assert " none" in summary and "incomplete [4]" in summary


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((5, 256), (5, 16, 16)),
        ((5, 3 * 64), (5, 8, 8, 3)),
        ((5, 1, 16, 16), (5, 16, 16)),
        ((5, 3, 8, 8), (5, 8, 8, 3)),
        ((5, 8, 8, 3), (5, 8, 8, 3)),
        ((5, 16, 16), (5, 16, 16)),
    ],
)
def test_images_for_figures(shape, expected):
    from fedpriv.audit.figures import as_images

    batch = np.arange(np.prod(shape), dtype=float).reshape(shape) / np.prod(shape)
    images = as_images(batch * 3 - 1)
    assert images.shape == expected
    assert images.min() == 0.0 and images.max() == 1.0  # clipped to the pixel range
    if shape == (5, 3, 8, 8):  # channels moved last, pixels unchanged
        np.testing.assert_array_equal(images[2, 1, 4], np.clip(batch[2, :, 1, 4] * 3 - 1, 0, 1))


def test_images_that_are_not_images():
    from fedpriv.audit.figures import as_images

    with pytest.raises(ValueError, match="not square"):
        as_images(np.zeros((2, 250)))


def test_damaged_tensor_is_reported_not_fatal(tmp_path, capsys):
    run_dir = tmp_path / "run"
    with AuditStore.create(run_dir, {}, seed=0) as store:
        store.begin_round(1)
        store.write_update(1, 0, [np.ones(4)], {"mechanism": "gaussian"})
        store.write_ground_truth(1, 0, [1, 2], {"images": _images(1, n=2)})
        attack_id = store.write_attack(1, 0, {"attack": "iga", "ssim": 0.5}, [_images(2, n=2)])
        store.complete_round(1)
        [path] = store.query(
            "SELECT path FROM tensors JOIN attacks USING (tensor_id) WHERE attack_id = ?",
            (attack_id,),
        )
    recon = run_dir / path["path"]
    recon.write_bytes(recon.read_bytes()[:-10])
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert f"error: {recon}" in out
    written = json.loads((run_dir / "report.json").read_text())
    assert not written["integrity"]["ok"]
    assert [p["path"] for p in written["integrity"]["problems"]] == [str(recon)]
    assert written["files"]["figures"] == []  # the damaged reconstruction is not drawn
    assert written["clients"][0]["attack"]["ssim"] == 0.5


def test_figures_are_redrawn_only_when_their_data_changes(tmp_path):
    run_dir = tmp_path / "run"
    with AuditStore.create(run_dir, {}, seed=0) as store:
        store.begin_round(1)
        store.write_ground_truth(1, 0, [1, 2], {"images": _images(1, n=2)})
        store.write_attack(1, 0, {"attack": "iga", "ssim": 0.2}, [_images(2, n=2)])
        store.complete_round(1)
        figure = run_dir / "reconstructions_round1.png"
        report_run(run_dir)
        first = figure.stat().st_mtime_ns
        assert report_run(run_dir)["files"]["figures"] == [str(figure)]
        assert figure.stat().st_mtime_ns == first  # kept: nothing new to show
        store.write_attack(1, 0, {"attack": "dlg", "ssim": 0.9}, [_images(1, n=2)])
        report_run(run_dir)
        assert figure.stat().st_mtime_ns > first  # a better attack arrived: redrawn


def test_terminal_tables_mark_a_vacuous_capacity_as_the_page_does(report) -> None:
    """Issue 41: the terminal printed log C = 2.34e+04 bare where report.html says it bounds
    nothing (above log |secret space|); both tables now mark it and say why, once."""
    from fedpriv.audit.vacuity import VACUOUS_MARK, terminal_marks
    from workflows.cli import report as report_cli
    from workflows.cli import simulate as simulate_cli

    reason = "vacuous: no release leaks more than log |secret space| ≤ 1,422 nats (x); log C = 9"
    clients = [{**c, "log_bayes_capacity": 2.34e4 if c["client_id"] == 1 else 3.0,
                "vacuous": {"log_bayes_capacity": reason} if c["client_id"] == 1 else {}}
               for c in report["clients"]]
    marks, footnote = terminal_marks(clients, "log_bayes_capacity")
    assert marks == ["", VACUOUS_MARK, ""] and len(footnote) == 1
    assert "1,422 nats (x): a larger value bounds nothing" in footnote[0]
    assert terminal_marks(report["clients"], "log_bayes_capacity") == (["", "", ""], [])
    result = {**report, "clients": clients, "chain": {"rounds": {}, "head": "0" * 64,
                                                        "entries": 0, "signature": None},
              "files": {"report": "r", "tallies_csv": "t", "figures": []}}
    for text in (simulate_cli.render(result), report_cli.render(result)):
        rows = [line for line in text.splitlines() if "2.34e+04" in line]
        assert len(rows) == 1 and f"2.34e+04{VACUOUS_MARK}" in rows[0]
        assert text.count("a larger value bounds nothing") == 1
