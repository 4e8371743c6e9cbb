"""The storage policy: which update arrays the store keeps, in which dtype, at what cost.

Runs small federations on the in-process Grid with ``audit.store_updates`` = ``attacked``,
``none`` and ``update_dtype = float16``; the bytes the report states are checked against the
files on disk (an independent count), and the offline audit must say which updates it could
not attack.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from reliability_support import QUICKSTART, Killed, LocalGrid, faulty_client_app

from fedpriv.audit import AuditStore
from fedpriv.audit.storage import encode_update, keeps_update
from fedpriv.errors import InputError
from strategies.server_run import run_federation
from workflows.config import load_config
from workflows.offline_audit import audit_run

SETTINGS = ["rounds=2", "data.num_clients=3", "mechanism.name=none", "train.batch_size=1",
            "train.sampling=fixed", "train.local_steps=1", "train.lr=0.1",
            "audit.attacks=['idlg']", "audit.iterations=3", "audit.clients=[1]",
            "audit.every=1", "audit.ground_truth=true"]  # fmt: skip


def _run(tmp_path_factory, *extra: str):
    cfg = load_config(QUICKSTART, [*SETTINGS, *extra])
    path = tmp_path_factory.mktemp("storage") / "run"
    report = run_federation(LocalGrid(faulty_client_app({}), 3), cfg, path)
    return path, report


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    return _run(tmp_path_factory, "audit.store_updates='attacked'")


def _kinds(run_dir, table, kind):
    with AuditStore.open(run_dir, readonly=True) as store:
        return {(r["round"], r["client_id"]): r["kind"] for r in store.query(
            f"SELECT x.round, x.client_id, t.kind FROM {table} x "
            "LEFT JOIN tensors t USING (tensor_id)") if r["kind"] in (kind, None)}


def test_policy_truth_table():
    assert [keeps_update(p, a) for p in ("all", "attacked", "none") for a in (True, False)] == [
        True, True, True, False, False, False]


def test_attacked_keeps_only_the_attacked_updates_and_everything_else(attacked):
    run_dir, report = attacked
    updates = _kinds(run_dir, "updates", "update")
    assert {cell for cell, kind in updates.items() if kind} == {(1, 1), (2, 1)}
    truth = _kinds(run_dir, "ground_truth", "ground_truth")
    assert truth == {(1, 1): "ground_truth", (2, 1): "ground_truth"}  # the attacked batches
    with AuditStore.open(run_dir, readonly=True) as store:
        assert len(store.query("SELECT * FROM tallies")) == 6  # tallies whatever the policy
        assert {u.client_id for u in store.iter_updates() if u.stored} == {1}
        assert {u.status for u in store.iter_updates()} == {"ok"}
    assert [c["rounds_participated"] for c in report["clients"]] == [2, 2, 2]


def test_report_states_the_bytes_on_disk(attacked):
    run_dir, report = attacked
    storage = report["storage"]
    with AuditStore.open(run_dir, readonly=True) as store:
        rows = store.query("SELECT kind, path FROM tensors")
    on_disk: dict[str, int] = {}
    for row in rows:
        on_disk[row["kind"]] = on_disk.get(row["kind"], 0) + (run_dir / row["path"]).stat().st_size
    assert {k: v for k, v in storage["bytes"].items() if v and k != "total"} == on_disk
    assert storage["bytes"]["total"] == sum(on_disk.values())
    assert (storage["client_rounds"], storage["updates_not_stored"]) == (6, 4)
    assert storage["bytes_per_client_round"]["update"] == round(on_disk["update"] / 6, 1)
    assert storage["store_updates"] == "attacked" and storage["tensor_files"] == len(rows)
    assert storage["database_bytes"] > 0


def test_offline_audit_says_what_was_not_stored(attacked, caplog):
    run_dir, _ = attacked
    with pytest.raises(InputError, match="none stored.*store_updates = 'attacked'"):
        audit_run(run_dir, attacks=["idlg"], clients=[0, 2], iterations=2, progress=False)
    with caplog.at_level(logging.WARNING, "workflows.offline_audit"):
        result = audit_run(run_dir, attacks=["idlg"], rounds=(1, 1), iterations=2,
                           progress=False)
    assert [(a["round"], a["client_id"]) for a in result["attacks"]] == [(1, 1)]
    assert result["not_stored"] == [{"round": 1, "client_id": 0}, {"round": 1, "client_id": 2}]
    assert "2 selected updates were not stored" in caplog.text


def test_none_keeps_no_update_but_the_attacked_images(tmp_path_factory):
    run_dir, report = _run(tmp_path_factory, "audit.store_updates='none'", "rounds=1")
    assert not any(_kinds(run_dir, "updates", "update").values())
    assert _kinds(run_dir, "ground_truth", "ground_truth") == {(1, 1): "ground_truth"}
    assert report["storage"]["bytes"]["update"] == 0
    assert report["clients"][1]["attack"]["ssim"] is not None  # the live attack still ran


def test_float16_updates_halve_the_bytes_within_rounding(tmp_path_factory):
    run_dir, report = _run(tmp_path_factory, "audit.update_dtype='float16'", "rounds=1",
                           "audit.attacks=[]")
    with AuditStore.open(run_dir, readonly=True) as store:
        dtypes = {r["dtypes_json"] for r in store.query(
            "SELECT dtypes_json FROM tensors WHERE kind = 'update'")}
        theta = store.load_global(1)
        update = store.load_update(next(store.iter_updates()).update_id)
    assert dtypes == {'["<f2", "<f2", "<f2"]'}
    assert {a.dtype for a in theta.values()} == {np.dtype(np.float32)}  # θ stays exact
    per_update = report["storage"]["bytes_per_client_round"]["update"]
    assert 13_700 * 2 < per_update < 13_700 * 2 + 1_000  # 2 bytes per parameter + npz headers
    assert all(a.dtype == np.float16 for a in update.values())


def test_encode_update_rounds_to_half_precision_and_refuses_overflow(caplog):
    rng = np.random.default_rng(0)
    delta = [rng.normal(scale=s, size=(50, 20)).astype(np.float32) for s in (1e-2, 1e-5)]
    wide = encode_update(delta, "float32")
    assert [a.dtype for a in wide] == [np.float32] * 2
    assert all(np.array_equal(a, d) for a, d in zip(wide, delta, strict=True))
    half = encode_update(delta, "float16")
    normal = np.abs(delta[0]) >= 2.0**-14
    err = np.abs(half[0].astype(np.float64) - delta[0])
    assert np.all(err[normal] <= 2.0**-11 * np.abs(delta[0][normal]))  # half an ulp, relative
    assert np.all(np.abs(half[1].astype(np.float64) - delta[1]) <= 2.0**-25)  # subnormal step/2
    with caplog.at_level(logging.WARNING):
        kept = encode_update([np.array([1e5, 1.0], np.float32)], "float16")
    assert kept[0].dtype == np.float32 and "float16's range" in caplog.text


def test_a_run_that_kept_no_updates_resumes_to_the_uninterrupted_tallies(tmp_path):
    """--resume rebuilds the ledger from the stored update rows; with store_updates = 'none'
    they hold no arrays, which the ledger does not need."""
    cfg = load_config(QUICKSTART, [*SETTINGS, "audit.store_updates='none'", "audit.attacks=[]"])
    whole = run_federation(LocalGrid(faulty_client_app({}), 3), cfg, tmp_path / "whole")
    with pytest.raises(Killed):
        run_federation(LocalGrid(faulty_client_app({}), 3, stop_at=2), cfg, tmp_path / "run")
    resumed = run_federation(LocalGrid(faulty_client_app({}), 3), cfg, tmp_path / "run",
                             resume=True)
    assert resumed["status"] == "completed" and resumed["completed_rounds"] == [1, 2]
    assert [c["epsilon"] for c in resumed["clients"]] == [c["epsilon"] for c in whole["clients"]]
