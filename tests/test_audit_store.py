"""The audit store's tables round-trip, its rules hold, and tampering is detected.

Values are read back both through the store's API and with a plain ``sqlite3`` connection
and ``hashlib`` (an independent reader of the documented schema).
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3

import numpy as np
import pytest

from fedpriv.audit import AuditStore, StoreError, verify
from fedpriv.errors import InputError
from fedpriv.mechanisms import build_mechanism
from fedpriv.optimizer_settings import OptimizerSettings
from fedpriv.protocol import ClientReport

NODE = 2**64 - 7  # Flower node ids are unsigned 64-bit: beyond SQLite's INTEGER
REPORT = ClientReport(
    partition_id=4, server_round=1, local_examples=64, local_steps=3, lr=0.05, batch_size=16.0,
    sampling="poisson", sample_rate=0.25, mechanism=build_mechanism("vmf", {"kappa": 100.0}),
    optimizer=OptimizerSettings("sgd", momentum=0.5), epsilon_budget=3.0,
)  # fmt: skip
META = {
    "report": REPORT.to_config(),
    "node_id": NODE, "num_examples": np.int64(64), "local_steps": 3, "lr": 0.05,
    "batch_size": 16, "sample_rate": 0.25, "mechanism": "vmf",
    "mechanism_params": {"clip": 1.0, "kappa": np.float64(100.0), "vmf_keep_norm": False},
    "formal_guarantee": np.bool_(True),
}  # fmt: skip
TALLY = {
    "epsilon": 1.5, "delta": 1e-5, "accountant": "rdp", "route": "approach1",
    "optimal_order": 12.0, "compose": "per-step", "releases": 6, "log_capacity_round": 2.0,
    "log_capacity_cumulative": 4.0, "threat_model": "record", "mbp_bound": 200.0,
    "abp_bound": math.inf, "details": {"warning": "optimal order at grid edge"},
}  # fmt: skip
ATTACK = {
    "attack": "iga", "iterations": 100, "restarts": 2, "pseudo_gradient": True, "mse": 0.02,
    "psnr": 17.0, "ssim": 0.6, "best_mse": 0.01, "best_psnr": 20.0, "best_ssim": 0.7,
    "label_accuracy": 1.0, "relative_leakage": 0.3, "mbp_estimate": 1.2, "abp_estimate": 0.4,
    "estimate": {"K": 8, "threshold": 0.5, "pool_size": 16, "smoothing": 1}, "seconds": 2.5,
}  # fmt: skip


def _raw(store, sql, *params):
    conn = sqlite3.connect(store.run_dir / "audit.sqlite")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path):
    with AuditStore.create(tmp_path / "run", {"rounds": 2, "lr": 0.05}, seed=7) as s:
        yield s


def _one_round(store, rnd=1, clients=(0, 1)):
    rng = np.random.default_rng(rnd)
    store.begin_round(rnd)
    store.write_global(rnd, {"w": rng.normal(size=(4, 3)), "b": np.zeros(4, np.float32)})
    for client in clients:
        store.write_update(rnd, client, [rng.normal(size=(4, 3))], META)
        store.write_tally(rnd, client, TALLY)
    store.complete_round(rnd, {"accuracy": 0.5, "loss": np.float32(0.25), "n": 3})


def test_runs_row(store):
    info = store.run_info()
    assert info["config"] == {"rounds": 2, "lr": 0.05}
    assert (info["seed"], info["status"], info["finished"], info["wall_seconds"]) == (
        7,
        "running",
        None,
        None,
    )
    store.mark_status("completed")
    info = store.run_info()
    assert info["status"] == "completed" and info["wall_seconds"] >= 0
    assert _raw(store, "SELECT count(*), status FROM runs") == [(1, "completed")]
    with pytest.raises(ValueError, match="run status"):
        store.mark_status("done")


def test_every_table_round_trips(store):
    rng = np.random.default_rng(0)
    theta = {"fc1.weight": rng.normal(size=(50, 256)).astype(np.float32)}
    delta = [rng.normal(size=(50, 256)).astype(np.float32), rng.normal(size=10)]
    truth = {"images": rng.uniform(size=(2, 1, 16, 16)), "labels": np.array([3, 5])}
    recon = {"images": rng.uniform(size=(2, 1, 16, 16))}
    store.begin_round(1)
    store.write_global(1, theta)
    uid = store.write_update(1, 4, delta, META)
    store.write_ground_truth(1, 4, np.array([11, 42]), truth)
    store.write_tally(1, 4, TALLY)
    store.write_tally(1, 4, {"mbp_estimate": 0.8, "abp_estimate": float("nan")})  # added later
    aid = store.write_attack(1, 4, ATTACK, recon)
    fid = store.record_failure(1, "non-finite", "NaN in update", client_id=9, node_id=NODE)
    store.complete_round(1, {"accuracy": 0.75, "loss": 1.5, "clients": 2})

    np.testing.assert_array_equal(store.load_global(1)["fc1.weight"], theta["fc1.weight"])
    loaded = store.load_update(uid)
    assert list(loaded) == ["arr_0", "arr_1"]
    for got, want in zip(loaded.values(), delta, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(store.load_ground_truth(1, 4)["labels"], [3, 5])
    np.testing.assert_array_equal(store.load_reconstruction(aid)["images"], recon["images"])

    [record] = store.iter_updates()
    assert (record.update_id, record.round, record.client_id, record.node_id) == (
        uid,
        1,
        4,
        str(NODE),
    )
    assert record.report == REPORT  # the client's report itself, its mechanism built again
    assert (record.formal_guarantee, record.pseudo_gradient, record.status) == (True, True, "ok")
    [row] = store.query("SELECT * FROM updates")  # the columns SQL readers read
    assert json.loads(row["mechanism_params_json"]) == {
        "clip": 1.0, "kappa": 100.0, "vmf_keep_norm": False}
    assert (row["num_examples"], row["local_steps"], row["lr"]) == (64, 3, 0.05)
    assert (row["batch_size"], row["sample_rate"], row["mechanism"]) == (16.0, 0.25, "vmf")
    # the file the row names has the recorded hash (independent of the store's loader)
    path, sha = _raw(store, "SELECT path, sha256 FROM tensors WHERE kind = 'update'")[0]
    assert hashlib.sha256((store.run_dir / path).read_bytes()).hexdigest() == sha == record.sha256

    [tally] = store.query("SELECT * FROM tallies")
    for key, value in TALLY.items():
        assert tally[key if key != "details" else "details_json"] == (
            json.dumps(value) if key == "details" else value
        )
    assert tally["mbp_estimate"] == 0.8 and tally["abp_estimate"] is None  # NaN = not measured
    [attack] = store.query("SELECT * FROM attacks")
    assert json.loads(attack["estimate_json"]) == ATTACK["estimate"]
    assert {k: attack[k] for k in ATTACK if k != "estimate"} == {
        k: (int(v) if isinstance(v, bool) else v) for k, v in ATTACK.items() if k != "estimate"
    }
    assert _raw(store, "SELECT round, client_id, record_ids_json FROM ground_truth") == [
        (1, 4, "[11, 42]")
    ]
    assert _raw(store, "SELECT failure_id, round, client_id, node_id, kind FROM failures") == [
        (fid, 1, 9, str(NODE), "non-finite")
    ]
    [rnd] = store.query("SELECT * FROM rounds")
    assert (rnd["status"], rnd["accuracy"], rnd["loss"]) == ("completed", 0.75, 1.5)
    assert json.loads(rnd["metrics_json"]) == {"clients": 2}
    assert rnd["completed"] >= rnd["started"]
    assert verify(store.run_dir) == []


def test_failed_reply_without_arrays(store):
    store.begin_round(1)
    uid = store.write_update(1, 2, None, {"status": "rejected", "error": "update norm is inf"})
    with pytest.raises(KeyError, match="no arrays"):
        store.load_update(uid)
    kept_none = store.write_update(1, 3, None, {})  # accepted, arrays not kept by the policy
    with pytest.raises(KeyError, match="no arrays"):
        store.load_update(kept_none)
    updates = {u.client_id: u for u in store.iter_updates(include_incomplete=True)}
    assert (updates[3].status, updates[3].stored, updates[2].stored) == ("ok", False, False)
    assert updates[2].report is None  # no report: nothing the client claimed
    with pytest.raises(sqlite3.IntegrityError):  # one reply per client and round
        store.write_update(1, 2, [np.ones(2)], {})
    assert [p.kind for p in verify(store.run_dir)] == ["incomplete-round"]  # no stray file


def test_round_rules(store):
    with pytest.raises(ValueError, match="not begun"):
        store.write_update(1, 0, [np.ones(2)], {})
    _one_round(store, 1)
    with pytest.raises(ValueError, match="exists already"):
        store.begin_round(1)
    with pytest.raises(ValueError, match="complete"):
        store.write_update(1, 5, [np.ones(2)], {})
    with pytest.raises(ValueError, match="complete"):
        store.complete_round(1)
    store.begin_round(2)
    with pytest.raises(ValueError, match="unknown update meta keys"):
        store.write_update(2, 0, [np.ones(2)], {"noise_multiplier": 1.0})
    store.write_attack(1, 0, {"attack": "dlg"})  # attacks may finish after their round
    store.write_tally(1, 0, {"abp_estimate": 0.1})
    assert store.completed_rounds() == [1] and store.incomplete_rounds() == [2]
    assert store.last_completed_round() == 1


def test_iter_updates_filters_and_skips_incomplete_rounds(store):
    _one_round(store, 1, clients=(0, 1, 2))
    _one_round(store, 2, clients=(0, 2))
    store.begin_round(3)
    store.write_update(3, 1, [np.ones(2)], {})
    got = [(u.round, u.client_id) for u in store.iter_updates()]
    assert got == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 2)]
    assert [(u.round, u.client_id) for u in store.iter_updates(rounds=[2], clients=[2, 1])] == [
        (2, 2)
    ]
    assert [(u.round, u.client_id) for u in store.iter_updates(clients=[1])] == [(1, 1)]
    everything = store.iter_updates(include_incomplete=True)
    assert [(u.round, u.client_id) for u in everything][-1] == (3, 1)


def test_discard_incomplete_rounds(store):
    _one_round(store, 1)
    store.begin_round(2)
    store.write_global(2, [np.ones(3)])
    store.write_update(2, 0, [np.ones(3)], {})
    (store.run_dir / "tensors" / "r000002" / ".x.npz.dead.tmp").write_bytes(b"half")
    assert store.discard_incomplete_rounds() == [2]
    assert not (store.run_dir / "tensors" / "r000002").exists()
    assert _raw(store, "SELECT count(*) FROM tensors WHERE round = 2") == [(0,)]
    assert _raw(store, "SELECT count(*) FROM updates WHERE round = 2") == [(0,)]
    assert verify(store.run_dir) == []
    _one_round(store, 2)  # the resumed run redoes round 2
    assert store.completed_rounds() == [1, 2]


def test_altered_and_missing_tensor_detected(store):
    _one_round(store, 1)
    paths = [row[0] for row in _raw(store, "SELECT path FROM tensors ORDER BY tensor_id")]
    altered, missing = store.run_dir / paths[1], store.run_dir / paths[2]
    raw = bytearray(altered.read_bytes())
    raw[-40] ^= 0x01  # one bit in the array data
    altered.write_bytes(bytes(raw))
    missing.unlink()
    [u1, u2] = store.iter_updates()
    with pytest.raises(StoreError, match="altered") as caught:
        store.load_update(u1.update_id)
    assert caught.value.key == str(altered)
    with pytest.raises(StoreError, match="missing") as caught:
        store.load_update(u2.update_id)
    assert caught.value.key == str(missing)
    problems = verify(store.run_dir)
    assert sorted((p.severity, p.path) for p in problems) == sorted(
        [("error", str(altered)), ("error", str(missing))]
    )
    size_only = verify(store.run_dir, hashes=False)  # a one-bit change keeps the size
    assert [p.path for p in size_only] == [str(missing)]


def test_stray_files_are_warnings(store):
    _one_round(store, 1)
    (store.run_dir / "tensors" / "r000001" / "update-c9-deadbeef.npz").write_bytes(b"orphan")
    (store.run_dir / "tensors" / "r000001" / ".g.npz.1234.tmp").write_bytes(b"half")
    found = sorted((p.severity, p.kind) for p in verify(store.run_dir))
    assert found == [("warning", "stray"), ("warning", "temporary")]


def test_create_refuses_to_overwrite(store):
    with pytest.raises(InputError, match="exists already") as caught:
        AuditStore.create(store.run_dir, {}, seed=1)
    assert caught.value.key == str(store.run_dir / "audit.sqlite")
    assert store.run_info()["seed"] == 7


def test_read_only_store_refuses_writes(store):
    _one_round(store, 1)
    with AuditStore.open(store.run_dir, readonly=True) as reader:
        assert reader.completed_rounds() == [1]
        with pytest.raises(ValueError, match="read-only"):
            reader.begin_round(2)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.query("DELETE FROM rounds")


def test_tensor_paths_outside_the_store_are_refused(store):
    _one_round(store, 1)
    conn = sqlite3.connect(store.run_dir / "audit.sqlite")
    with conn:
        conn.execute("UPDATE tensors SET path = '../../etc/passwd' WHERE kind = 'global'")
    conn.close()
    with pytest.raises(StoreError, match="outside"):
        store.load_global(1)
    # the row was edited outside the audit (a chain break), its file no longer referenced
    assert [p.kind for p in verify(store.run_dir)] == ["chain", "tensor", "stray"]


def test_dangling_reference_is_a_database_error(store):
    _one_round(store, 1)
    conn = sqlite3.connect(store.run_dir / "audit.sqlite")  # foreign keys off by default
    with conn:
        conn.execute("UPDATE globals SET tensor_id = 999 WHERE round = 1")
    conn.close()
    problems = [(p.severity, p.kind, p.message) for p in verify(store.run_dir)]
    assert ("error", "database", "row 1 of globals references a missing tensors") in problems


def test_threads_share_one_store(store):
    from concurrent.futures import ThreadPoolExecutor

    _one_round(store, 1)

    def attack(k):
        recon = {"images": np.full((2, 16, 16), k / 20)}
        return store.write_attack(1, k % 2, {"attack": "iga", "ssim": k / 20}, recon)

    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = list(pool.map(attack, range(20)))
    assert len(set(ids)) == 20
    for k, attack_id in enumerate(ids):
        assert store.load_reconstruction(attack_id)["images"][0, 0, 0] == k / 20
    assert verify(store.run_dir) == []


def test_public_names_resolve_and_import_is_light():
    import subprocess
    import sys

    import fedpriv.audit

    for name in fedpriv.audit.__all__:
        assert getattr(fedpriv.audit, name) is not None
    code = "import sys, fedpriv.audit; print(sorted({'torch', 'matplotlib'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_altered_stored_report_is_a_store_error(store):
    """The stored report is read back as the server reads a reply: an altered one that no
    longer validates names the database and the update."""
    _one_round(store, 1, clients=(0,))
    conn = sqlite3.connect(store.run_dir / "audit.sqlite")
    with conn:
        conn.execute("UPDATE updates SET report_json = json_set(report_json, '$.mechanism', "
                     "'nonesuch')")
    conn.close()
    with pytest.raises(StoreError, match="update 1: the stored report does not read back"):
        list(store.iter_updates())
