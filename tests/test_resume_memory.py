"""``--resume`` rebuilds everything the audit remembers — replay sketches, canary pools and the
node ↔ client bindings — under every ``audit.store_updates`` policy: a run stopped after round
2 and resumed writes exactly the rows of the uninterrupted run (issue 25 item 8).

Client 2 replays its round-1 update from round 2 on (``[[adversary]] replay``): after the
resume, its replays of rounds 3 and 4 must still be recognised as the pre-crash round 1's, which
only the stored sketch can tell when the policy kept no arrays. Canaries are on, so every
client's pooled ε lower bound depends on the pool of the rounds before the crash. From round 3
on, node 1001 (client 1) claims client 2's partition id: its node is bound to client 1 since
round 1, so the claim must be refused after the resume as before it.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Message, MessageType
from flwr.clientapp import ClientApp
from reliability_support import QUICKSTART, Killed, LocalGrid
from store_support import rechain

from clients.adversaries import adversary_mod
from fedpriv.audit import AuditStore
from strategies.server_run import run_federation
from workflows.config import load_config

ROUNDS = 4
SETTINGS = [f"rounds={ROUNDS}", "data.num_clients=3", "train.local_steps=1", "train.lr=1.0",
            "audit.canaries.enabled=true", "audit.canaries.count=200",
            "audit.attacks=[]",  # not about attacks; the "attacked" policy sets its own
            "adversary=[{clients = [2], behaviour = 'replay'}]"]  # fmt: skip
POLICIES = {
    "all": [],
    "attacked": ["audit.attacks=['idlg']", "audit.iterations=2", "audit.clients=[1]",
                 "audit.every=3"],
    "none": [],
}


def _claims_another_id(msg: Message, context, call_next) -> Message:  # noqa: ANN001
    reply = call_next(msg, context)
    if (msg.metadata.message_type == MessageType.TRAIN and not reply.has_error()
            and int(context.node_config["partition-id"]) == 1
            and int(msg.content["config"]["server-round"]) >= 3):
        reply.content["meta"]["partition-id"] = 2
    return reply


def _client_app() -> ClientApp:
    from clients.client_app import evaluate, train

    app = ClientApp(mods=[_claims_another_id, adversary_mod])
    app.train()(train)
    app.evaluate()(evaluate)
    return app


client_app = _client_app()


def _run(cfg, run_dir: Path, grid: LocalGrid | None = None, resume: bool = False) -> dict:  # noqa: ANN001
    grid = grid or LocalGrid(client_app, cfg.data.num_clients)
    return run_federation(grid, cfg, run_dir, resume=resume)


def _rows(run_dir: Path) -> dict:
    """Every row a resumed run must reproduce (not ids, paths, hashes or wall-clock times)."""
    with AuditStore.open(run_dir, readonly=True) as store:
        memory = [(r, c, k, {n: a.tolist() for n, a in s.items()})
                  for r, c, k, s in store.iter_memory()]
        return {
            "tallies": store.query("SELECT * FROM tallies ORDER BY round, client_id"),
            "failures": store.query("SELECT round, client_id, node_id, kind, message FROM "
                                    "failures ORDER BY round, client_id, kind, message"),
            "updates": [(u.round, u.client_id, u.node_id, u.status, u.report, u.stored)
                        for u in store.iter_updates()],
            "memory": memory,
            "aggregates": [store.load_aggregate(r) for r in store.completed_rounds()],
        }


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_resumed_run_remembers_what_the_uninterrupted_run_does(policy: str,
                                                                  tmp_path: Path) -> None:
    cfg = load_config(QUICKSTART, [*SETTINGS, f"audit.store_updates='{policy}'",
                                   *POLICIES[policy]])
    whole = _run(cfg, tmp_path / "whole")
    grid = LocalGrid(client_app, cfg.data.num_clients, stop_at=3)
    with pytest.raises(Killed):
        _run(cfg, tmp_path / "run", grid)
    grid.stop_at = None  # the server restarts; the clients (and the replayer's memory) live on
    resumed = _run(cfg, tmp_path / "run", grid, resume=True)
    assert resumed["status"] == whole["status"] == "completed"
    a, b = _rows(tmp_path / "whole"), _rows(tmp_path / "run")
    for key in ("tallies", "failures", "updates", "memory"):
        assert a[key] == b[key], key
    for x, y in zip(a["aggregates"], b["aggregates"], strict=True):
        for name in x:
            np.testing.assert_array_equal(x[name], y[name])
    replays = [f for f in a["failures"] if f["client_id"] == 2]
    assert [f["round"] for f in replays] == [2, 3, 4]  # every replay caught, after resume too
    assert all("round 1" in f["message"] for f in replays)
    assert {k for _, _, k, _ in a["memory"]} == {"sketch", "canaries"}
    thefts = [f for f in a["failures"] if f["kind"] == "identity"]
    assert [(f["round"], f["node_id"]) for f in thefts] == [(3, "1001"), (4, "1001")]


def test_a_resumed_run_keeps_the_replays_cross_round_evidence(tmp_path: Path) -> None:
    """Under the oracle (``audit.ground_truth``) the replay's ``sensitivity-rounds`` evidence
    (its Σ z's and the client's look count, which sets the level) is a memory row: a run
    stopped after round 2 and resumed stores the verdicts and tallies of the uninterrupted
    run (issue 42)."""
    cfg = load_config(QUICKSTART, [*SETTINGS, "rounds=3", "audit.ground_truth=true",
                                   "audit.store_updates='none'"])
    whole = _run(cfg, tmp_path / "whole")
    grid = LocalGrid(client_app, cfg.data.num_clients, stop_at=3)
    with pytest.raises(Killed):
        _run(cfg, tmp_path / "run", grid)
    grid.stop_at = None
    resumed = _run(cfg, tmp_path / "run", grid, resume=True)
    assert resumed["status"] == whole["status"] == "completed"
    a, b = _rows(tmp_path / "whole"), _rows(tmp_path / "run")
    for key in ("tallies", "failures", "updates", "memory"):
        assert a[key] == b[key], key
    rows = [(r, c, s) for r, c, k, s in a["memory"] if k == "sensitivity-rounds"]
    assert {c for r, c, _ in rows if r == 2} == {0, 1}  # client 2 replays: no fresh θ
    assert all(s["look"] == [r] for r, c, s in rows if c == 0)  # one look a round


def test_the_entries_rebuild_the_replays_evidence():
    """``SensitivityReplay.memory`` → store encoding → ``remember`` rebuilds the evidence and
    looks exactly; a row of another shape is a ValueError (the resume's StoreError)."""
    from fedpriv.audit.tensors import decode_state, encode_state
    from strategies.sensitivity_replay import SensitivityReplay

    live = SensitivityReplay(None, ("mlp", (1,), 2))  # type: ignore[arg-type]
    live._evidence = {3: {"signal": (0.1, 2.5, 2), "partition": (-1.0, 7.25, 2)}, 5: {}}
    live._looks = {3: 2, 5: 1}
    rebuilt = SensitivityReplay(None, ("mlp", (1,), 2))  # type: ignore[arg-type]
    for cid in (3, 5):
        rebuilt.remember(cid, decode_state(encode_state(live.memory(cid)), Path("db"), "row"))
    assert rebuilt._evidence == live._evidence and rebuilt._looks == live._looks
    assert live.memory(4) is None
    for bad in ({"look": np.array([0])}, {"look": np.array([1]), "z_signal": np.zeros(2)},
                {"look": np.array([1.0])}):
        with pytest.raises(ValueError, match="sensitivity-rounds"):
            rebuilt.remember(3, bad)


def _same(x: object, y: object) -> bool:
    """Deep equality of plain objects, containers and arrays (bit for bit)."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype
                and np.array_equal(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return type(x) is type(y) and len(x) == len(y) and all(map(_same, x, y))
    if hasattr(x, "__dict__") and type(x) is type(y):
        return _same(vars(x), vars(y))
    return x == y


def test_the_entries_rebuild_every_field_of_the_replay_memory():
    """Whatever :class:`UpdateSketches` keeps per client (a field added later included) must be
    rebuilt by ``remember`` from the entries ``add`` returned: the resumed run's memory is the
    uninterrupted run's, attribute by attribute."""
    from fedpriv.verification.replay import UpdateSketches

    rng = np.random.default_rng(7)
    live, rebuilt = UpdateSketches(500, seed=3), UpdateSketches(500, seed=3)
    entries = [(rnd, cid, live.add(rnd, cid, rng.normal(size=500).astype(np.float32)))
               for rnd in range(1, 4) for cid in (0, 2)]
    from fedpriv.audit.tensors import decode_state, encode_state

    for rnd, cid, entry in entries:  # through the store's encoding, as a resume reads them
        rebuilt.remember(rnd, cid, decode_state(encode_state(entry), Path("db"), "row"))
    assert _same(live, rebuilt)



def _huge_header_bundle() -> bytes:
    """An ``.npz`` whose one member declares 2⁴⁵ float64 (256 TiB) and holds 16 bytes."""
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (2**45,)})
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("sketch.npy", header.getvalue() + b"\0" * 16)
    return bundle.getvalue()


def _bundle(**arrays: np.ndarray) -> bytes:
    from fedpriv.audit.tensors import encode_state

    return encode_state(arrays)


@pytest.mark.parametrize(("kind", "state", "problem"), [
    ("sketch", _huge_header_bundle(),
     r"declares shape \[35184372088832\] dtype <f8, more data than its"),
    ("sketch", b"not a bundle", "does not read back as arrays"),
    ("sketch", _bundle(sketch=np.zeros(7)),
     r"sketch must be \d+ finite numbers, not an array of shape \[7\]"),
    ("canaries", _bundle(ins=np.zeros((2, 2)), outs=np.zeros(3), formal=np.ones(1)),
     r"finite 'ins' and 'outs' scores and one 'formal' ε, not shapes \[2, 2\], \[3\]"),
], ids=["2^45 elements", "not a bundle", "another width", "canary scores of another shape"])
def test_an_altered_memory_row_stops_the_resume_with_a_store_error(
    kind: str, state: bytes, problem: str, tmp_path: Path
) -> None:
    """A memory row that does not read back, or reads back as another model's sketch or
    malformed canary scores, stops ``--resume`` with the store's error (the CLI's exit 2)
    naming the row — before a round runs, and without allocating what a hostile header
    declares."""
    import sqlite3

    from fedpriv.audit.errors import StoreError
    from fedpriv.audit.reader import DB_NAME

    cfg = load_config(QUICKSTART, [*SETTINGS, "rounds=2"])
    grid = LocalGrid(client_app, cfg.data.num_clients, stop_at=2)
    with pytest.raises(Killed):
        _run(cfg, tmp_path / "run", grid)
    with sqlite3.connect(tmp_path / "run" / DB_NAME) as conn:
        changed = conn.execute("UPDATE memory SET state = ? WHERE round = 1 AND client_id = 0 "
                               "AND kind = ?", (state, kind)).rowcount
    assert changed == 1
    rechain(tmp_path / "run")  # as a hostile editor with fedpriv's code would: the chain agrees
    grid.stop_at = None
    where = rf"memory row \({kind}, round 1, client 0\)"
    with pytest.raises(StoreError, match=where) as caught:
        _run(cfg, tmp_path / "run", grid, resume=True)
    assert caught.match(problem)


def test_a_memory_bundle_is_an_npz_numpy_reads_and_the_same_arrays_give_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``encode_state`` writes its members whole with a fixed timestamp (issue 37): numpy's
    own reader gives the arrays back exactly, dtype and shape included, and writing the same
    arrays again gives the same bytes. Every member bears ``ZipInfo``'s own stamp
    (1980-01-01) and a clock days later changes no byte (``writestr`` given a bare name stamps
    the time of writing: two such calls within the zip clock's 2 s agree, so equal bytes alone
    do not show it). numpy's savez gave the same bytes too (its streamed members get
    ``ZipInfo``'s stamp) but forced a zip64 extra field into every member's local header:
    written whole, a member's header has none."""
    import struct
    import time
    import zipfile
    from types import SimpleNamespace

    from fedpriv.audit.tensors import encode_state

    arrays = {"sketch": np.linspace(-1.0, 1.0, 9), "ins": np.arange(6, dtype=np.float32)
              .reshape(2, 3), "formal": np.array([np.inf])}
    data = encode_state(arrays)
    with np.load(io.BytesIO(data), allow_pickle=False) as bundle:
        back = {name: bundle[name] for name in bundle.files}
    assert list(back) == list(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        assert np.array_equal(back[name], array)
    with zipfile.ZipFile(io.BytesIO(data)) as bundle:
        members = bundle.infolist()
    assert [m.date_time for m in members] == [zipfile.ZipInfo().date_time] * len(arrays)
    # a local file header's extra-field length is at byte 28 (savez's zip64 field: 20 bytes)
    assert [struct.unpack_from("<H", data, m.header_offset + 28)[0] for m in members] == [
        0] * len(arrays)
    later = time.time() + 3 * 86400.0  # what writestr given a bare name would stamp
    monkeypatch.setattr(zipfile, "time", SimpleNamespace(time=lambda: later,
                                                         localtime=time.localtime))
    assert encode_state(dict(arrays)) == data
