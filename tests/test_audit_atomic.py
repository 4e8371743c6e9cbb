"""Atomic, durable file writes: all or nothing, even when a write fails half-way."""

from __future__ import annotations

import hashlib
import io
import os

import numpy as np
import pytest

from fedpriv.atomic import TEMP_SUFFIX, atomic_write_bytes, make_dirs_durable
from fedpriv.audit.errors import StoreError
from fedpriv.audit.tensors import load_arrays, save_arrays


def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIX))


class _HalfWriter(io.FileIO):
    """A file whose write() stores half of the bytes, then fails (a full disk, a signal)."""

    def write(self, data):
        super().write(bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize("existing", [None, b"old content"])
def test_failure_mid_write_leaves_no_partial_file(tmp_path, monkeypatch, existing):
    target = tmp_path / "t.bin"
    if existing is not None:
        target.write_bytes(existing)
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: _HalfWriter(fd, "wb"))
    with pytest.raises(OSError, match="No space"):
        atomic_write_bytes(target, b"x" * 10_000)
    assert _leftovers(tmp_path) == []
    if existing is None:
        assert not target.exists()
    else:
        assert target.read_bytes() == existing


def test_failure_at_fsync_leaves_no_file(tmp_path, monkeypatch):
    def broken_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output"):
        atomic_write_bytes(tmp_path / "t.bin", b"payload")
    assert list(tmp_path.iterdir()) == []


def test_write_is_complete_and_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    data = os.urandom(100_000)
    atomic_write_bytes(tmp_path / "t.bin", data)
    assert (tmp_path / "t.bin").read_bytes() == data
    assert len(synced) == 2  # the file's data, then the directory entry
    assert _leftovers(tmp_path) == []


def test_make_dirs_durable_creates_nested(tmp_path):
    make_dirs_durable(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir()
    make_dirs_durable(tmp_path / "a" / "b" / "c")  # idempotent


def test_tensor_bundle_round_trip_and_hash(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {"fc1.weight": rng.normal(size=(50, 256)).astype(np.float32), "b": np.arange(7)}
    info = save_arrays(tmp_path / "x.npz", arrays)
    assert info.sha256 == hashlib.sha256((tmp_path / "x.npz").read_bytes()).hexdigest()
    assert info.names == ["fc1.weight", "b"]
    assert info.shapes == [[50, 256], [7]]
    assert info.dtypes == [np.dtype(np.float32).str, np.dtype(np.int64).str]
    loaded = load_arrays(tmp_path, "x.npz", info)
    assert list(loaded) == ["fc1.weight", "b"]
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name], array)
        assert loaded[name].dtype == array.dtype


def test_tensor_bundle_refuses_objects_and_empty(tmp_path):
    with pytest.raises(ValueError):
        save_arrays(tmp_path / "o.npz", [np.array([{"a": 1}], dtype=object)])
    with pytest.raises(ValueError):
        save_arrays(tmp_path / "e.npz", [])
    assert _leftovers(tmp_path) == []


def test_altered_and_missing_bundle_name_the_file(tmp_path):
    path = tmp_path / "x.npz"
    info = save_arrays(path, [np.zeros(100)])
    raw = bytearray(path.read_bytes())
    raw[-30] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="altered") as caught:
        load_arrays(tmp_path, "x.npz", info)
    assert caught.value.key == str(path)
    path.unlink()
    with pytest.raises(StoreError, match="missing") as caught:
        load_arrays(tmp_path, "x.npz", info)
    assert caught.value.key == str(path)
