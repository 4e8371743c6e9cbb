"""A hostile store is read within bounds: tensor files must be regular files reached inside the
run without a symbolic link, of the size their row records, their ``.npy`` headers agreeing
with the row before anything is allocated. Each case is a :class:`StoreError` naming the file;
``fedpriv audit`` exits 2 with one line, ``fedpriv report`` lists it and never waits on it."""

from __future__ import annotations

import io
import os
import shutil
import socket
import stat
import zipfile

import numpy as np
import pytest
from cli_support import run_cli
from store_support import make_store, replace_update_file, set_update_row, update_row

from fedpriv.audit import AuditStore, StoreError, verify

HUGE = 2**40  # elements: 4 TiB of float32


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("hostile") / "run")


@pytest.fixture
def run_dir(pristine, tmp_path):
    return shutil.copytree(pristine, tmp_path / "run", symlinks=True)


def _update_file(run_dir):
    return run_dir / update_row(run_dir)["path"]


def _load_update(run_dir):
    with AuditStore.open(run_dir, readonly=True) as store:
        [update] = store.iter_updates()
        return store.load_update(update.update_id)


def _refused(run_dir, capsys, path, message, first=None):
    """The library refuses the update naming ``path``; ``audit`` exits 2 with one line before
    attacking, naming the first file refused (``first``, default ``path``: the audit checks
    the whole record first); ``report`` finishes and lists the file as an integrity error."""
    with pytest.raises(StoreError, match=message) as caught:
        _load_update(run_dir)
    assert caught.value.key == str(path)
    code, _, err = run_cli(capsys, "audit", str(run_dir), "--iterations", "1")
    assert code == 2 and "Traceback" not in err, err
    [line] = err.strip().splitlines()
    assert line.startswith("fedpriv audit: error: ") and str(first or path) in line, line
    code, report, err = run_cli(capsys, "report", str(run_dir), "--json")
    assert code == 0, err
    assert not report["integrity"]["ok"]
    assert str(path) in {p["path"] for p in report["integrity"]["problems"]}
    return line


def _npz(shape, dtype="<f4", data=b"\0" * 32, compress=zipfile.ZIP_STORED, name="w.npy"):
    """An ``.npz`` whose one member's header declares ``shape`` and ``dtype`` over ``data``."""
    member = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(member, header)
    member.write(data)
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w", compression=compress) as zf:
        zf.writestr(name, member.getvalue())
    return bundle.getvalue()


@pytest.mark.timeout(120)  # before the fix, opening the FIFO waited for a writer forever
def test_a_fifo_tensor_file_is_refused_without_waiting(run_dir, capsys):
    path = _update_file(run_dir)
    path.unlink()
    os.mkfifo(path)
    _refused(run_dir, capsys, path, "the tensor file is a FIFO")


@pytest.mark.timeout(120)
def test_a_tensors_symlink_to_dev_with_a_row_naming_zero_is_refused(run_dir, capsys):
    shutil.rmtree(run_dir / "tensors")
    (run_dir / "tensors").symlink_to("/dev")
    set_update_row(run_dir, path="tensors/zero")
    line = _refused(run_dir, capsys, run_dir / "tensors" / "zero", "tensors/ is a symbolic link",
                    first=run_dir / "tensors")  # θ's file, written first, is refused first
    assert "symbolic link" in line


@pytest.mark.parametrize("relative", ["tensors/../audit.sqlite", "tensors/r000001/../../x",
                                      "/etc/passwd", "tensors", "r000001/update.npz"])
def test_a_row_path_leaving_tensors_is_refused(run_dir, capsys, relative):
    set_update_row(run_dir, path=relative)
    with pytest.raises(StoreError, match="outside tensors/") as caught:
        _load_update(run_dir)
    assert caught.value.key == str(run_dir / "audit.sqlite")
    code, _, err = run_cli(capsys, "audit", str(run_dir), "--iterations", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1 and relative in err, err


def test_a_tensor_file_symlinked_outside_the_run_is_refused(run_dir, tmp_path, capsys):
    path = _update_file(run_dir)
    outside = tmp_path / "outside.npz"
    path.rename(outside)
    path.symlink_to(outside)  # the very bytes the row records, but not inside the run
    _refused(run_dir, capsys, path, "the tensor file is a symbolic link")


def test_a_round_directory_symlinked_outside_the_run_is_refused(run_dir, tmp_path, capsys):
    path = _update_file(run_dir)
    moved = shutil.move(path.parent, tmp_path / "elsewhere")
    path.parent.symlink_to(moved)
    _refused(run_dir, capsys, path, f"{path.parent.name}/ is a symbolic link",
             first=path.parent)  # θ's file, written first, is refused first


def test_a_device_tensor_file_is_refused(run_dir, capsys):
    path = _update_file(run_dir)
    path.unlink()
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD (run as root)")
    _refused(run_dir, capsys, path, "the tensor file is a character device")


def test_a_socket_tensor_file_is_refused(run_dir, capsys, monkeypatch):
    path = _update_file(run_dir)
    path.unlink()
    monkeypatch.chdir(path.parent)  # a socket's path is limited to 107 bytes
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path.name)
        _refused(run_dir, capsys, path, "the tensor file is a socket")


@pytest.mark.timeout(120)
def test_a_header_declaring_2_40_elements_is_refused_before_allocating(run_dir, capsys):
    path = replace_update_file(run_dir, _npz([HUGE]))
    line = _refused(run_dir, capsys, path, rf"declares shape \[{HUGE}\] dtype <f4")
    assert "expected shape [8] dtype <f4, as recorded" in line


@pytest.mark.timeout(120)
def test_a_row_and_header_both_declaring_2_40_elements_are_refused(run_dir, capsys):
    path = replace_update_file(run_dir, _npz([HUGE]))
    set_update_row(run_dir, shapes_json=f"[[{HUGE}]]")
    _refused(run_dir, capsys, path, "more data than the file's")


def test_a_header_of_another_dtype_is_refused(run_dir, capsys):
    path = replace_update_file(run_dir, _npz([8], dtype="<f8", data=b"\0" * 64))
    _refused(run_dir, capsys, path, r"declares shape \[8\] dtype <f8")


def test_a_compressed_member_is_refused(run_dir, capsys):
    path = replace_update_file(run_dir, _npz([8], compress=zipfile.ZIP_DEFLATED))
    _refused(run_dir, capsys, path, "w.npy is compressed")


def test_other_array_names_are_refused(run_dir, capsys):
    path = replace_update_file(run_dir, _npz([8], name="x.npy"))
    _refused(run_dir, capsys, path, r"holds arrays \['x'\]")


def test_a_file_of_another_size_than_recorded_is_refused_before_reading(run_dir, capsys):
    path = _update_file(run_dir)
    recorded = update_row(run_dir)["nbytes"]
    with path.open("ab") as handle:
        handle.truncate(recorded + 2**30)  # a sparse gigabyte more than the row records
    message = f"{recorded + 2**30} bytes \\(expected {recorded} bytes, as recorded\\)"
    _refused(run_dir, capsys, path, message)
    assert [p.path for p in verify(run_dir, hashes=False)] == [str(path)]


def test_a_row_whose_shapes_are_not_lists_of_sizes_is_refused(run_dir, capsys):
    set_update_row(run_dir, shapes_json="[" * 100_000 + "]" * 100_000)
    with pytest.raises(StoreError, match="is altered") as caught:
        _load_update(run_dir)
    assert caught.value.key == str(run_dir / "audit.sqlite")
    assert str(_update_file(run_dir)) in str(caught.value)
    code, _, err = run_cli(capsys, "audit", str(run_dir), "--iterations", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
