"""Tensor files of the audit store: ``.npz`` bundles written atomically, read back verified.

A bundle holds one or more named arrays (e.g. a model's parameters layer by layer, in the
model's order). It is serialised with :func:`numpy.savez` (uncompressed, no pickles), hashed
with SHA-256 and written with :func:`fedpriv.atomic.atomic_write_bytes`. The database
row that references the file is committed only after this returns, so a committed reference
always points at a complete file whose hash is known; a file written with ``durable=False``
(the store's files of a round still running) is made durable by the store before the round
completes (:meth:`fedpriv.audit.AuditStore.complete_round`).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat as stat_module
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fedpriv.atomic import atomic_write_bytes
from fedpriv.audit.errors import StoreError

__all__ = ["Arrays", "TensorInfo", "check_size", "decode_state", "encode_state", "load_arrays",
           "save_arrays"]

#: Arrays accepted by the store: named (kept in order) or a plain sequence (named arr_0, ...).
Arrays = Mapping[str, np.ndarray] | Sequence[np.ndarray]
_REGULAR = "a regular file inside the run directory, reached without symbolic links"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: were a FIFO swapped in after the lstat, opening it would not wait for a writer.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = (
    (stat_module.S_ISLNK, "a symbolic link"), (stat_module.S_ISREG, "a regular file"),
    (stat_module.S_ISDIR, "a directory"), (stat_module.S_ISFIFO, "a FIFO"),
    (stat_module.S_ISSOCK, "a socket"), (stat_module.S_ISCHR, "a character device"),
    (stat_module.S_ISBLK, "a block device"),
)  # fmt: skip
_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


@dataclass(frozen=True)
class TensorInfo:
    """What the database records about one tensor file."""

    sha256: str
    names: list[str]
    shapes: list[list[int]]
    dtypes: list[str]
    nbytes: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TensorInfo:
        """What a ``tensors`` row records (``sha256``, the ``*_json`` lists, ``nbytes``).

        Raises
        ------
        ValueError
            A column does not hold what the store writes (an altered database).
        """
        info = cls(row["sha256"], json.loads(row["names_json"]), json.loads(row["shapes_json"]),
                   json.loads(row["dtypes_json"]), row["nbytes"])
        lists = (info.names, info.shapes, info.dtypes)
        if not (isinstance(info.nbytes, int) and info.nbytes >= 0
                and all(isinstance(x, list) and len(x) == len(info.names) for x in lists)
                and all(isinstance(s, list) and all(isinstance(n, int) and n >= 0 for n in s)
                        for s in info.shapes)):
            raise ValueError("names, shapes and dtypes are not one entry per array, or the "
                             "shapes or size not counts")
        return info


def _named(arrays: Arrays) -> dict[str, np.ndarray]:
    if isinstance(arrays, Mapping):
        named = {str(k): np.asarray(v) for k, v in arrays.items()}
    else:
        named = {f"arr_{i}": np.asarray(v) for i, v in enumerate(arrays)}
    if not named:
        raise ValueError("a tensor bundle needs at least one array")
    return named


def save_arrays(path: Path, arrays: Arrays, *, durable: bool = True) -> TensorInfo:
    """Serialise ``arrays`` to ``path`` atomically (and durably unless ``durable=False``);
    return hash, shapes, dtypes."""
    named = _named(arrays)
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **named)
    data = buffer.getvalue()
    atomic_write_bytes(path, data, durable=durable)
    return TensorInfo(
        sha256=hashlib.sha256(data).hexdigest(),
        names=list(named),
        shapes=[list(a.shape) for a in named.values()],
        dtypes=[a.dtype.str for a in named.values()],
        nbytes=len(data),
    )


def encode_state(arrays: Mapping[str, np.ndarray]) -> bytes:
    """A small named bundle (what the audit remembers of one update, ``memory`` rows) as
    ``.npz`` bytes: exact, no pickles; an empty mapping is an empty bundle. The members are
    those :func:`numpy.savez` writes (uncompressed ``.npy``), each written whole (ZipInfo's
    fixed 1980 stamp, no zip64 extra field) instead of streamed as savez does: the same
    arrays give the same bytes. The zip is laid out here (:func:`_stored_zip`), the bytes
    ``zipfile`` writes for such members, in a fraction of its time (one row per reply and
    round)."""
    return _stored_zip([(f"{name}.npy", _npy(np.asarray(value)))
                        for name, value in arrays.items()])


@lru_cache(maxsize=64)
def _npy_header(dtype: np.dtype, shape: tuple[int, ...], fortran: bool) -> bytes:
    """The ``.npy`` header :func:`numpy.lib.format.write_array` writes for arrays of this
    dtype, shape and order (it depends on nothing else), built from them as write_array
    builds it: format 1.0, or 2.0 for a header over 64 KiB (a structured dtype whose field
    names need format 3.0 is refused with ValueError). Nothing of the array's size is
    allocated: a canary array's shape changes from client to client."""
    fields = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran,
              "shape": shape}
    member = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(member, fields)
    except ValueError:  # too long for format 1.0's 16-bit header length
        member = io.BytesIO()
        np.lib.format.write_array_header_2_0(member, fields)
    return member.getvalue()


def _npy(array: np.ndarray) -> bytes:
    """``array`` as :func:`numpy.lib.format.write_array` writes it: its header, then its data
    in the order the header names (Fortran for an array only Fortran-contiguous).
    ValueError for an object dtype (no pickles)."""
    if array.dtype.hasobject:
        raise ValueError("Object arrays cannot be saved when allow_pickle=False")
    fortran = bool(array.flags.f_contiguous and not array.flags.c_contiguous)
    header = _npy_header(array.dtype, array.shape, fortran)
    return header + (array.T if fortran else array).tobytes()


def _stored_zip(members: Sequence[tuple[str, bytes]]) -> bytes:
    """The zip ``zipfile.ZipFile(buffer, "w", ZIP_STORED)`` writes for these members, each
    ``writestr(ZipInfo(name), data)``: a local header (ZipInfo's defaults, 1980-01-01, the
    data's CRC-32 and size) and the data per member, then the central directory and its end
    record. ValueError where zipfile would write zip64 fields, which this layout has not:
    more than 65,535 members, or members of more than (2³¹ − 1) / 1.05 bytes (about 1.9
    GiB) together (zipfile gives a member zip64 fields from 1.05 × its size > 2³¹ − 1, and
    the directory from an offset > 2³¹ − 1)."""
    if len(members) > zipfile.ZIP_FILECOUNT_LIMIT:
        raise ValueError(f"{len(members)} arrays: too many for a memory row (at most "
                         f"{zipfile.ZIP_FILECOUNT_LIMIT})")
    total = sum(len(data) for _, data in members)
    if total * 1.05 > zipfile.ZIP64_LIMIT:
        raise ValueError(f"{total} bytes of arrays: too large for a memory row (at most "
                         f"{int(zipfile.ZIP64_LIMIT / 1.05)})")
    local, central, offset = [], [], 0
    for name, data in members:
        encoded, flags = _zip_name(name)
        crc, size, (time_, date) = zlib.crc32(data), len(data), _ZIP_STAMP
        local += [struct.pack(zipfile.structFileHeader, zipfile.stringFileHeader, 20, 0, flags,
                              zipfile.ZIP_STORED, time_, date, crc, size, size, len(encoded), 0),
                  encoded, data]
        central += [struct.pack(zipfile.structCentralDir, zipfile.stringCentralDir, 20,
                                _ZIP_SYSTEM, 20, 0, flags, zipfile.ZIP_STORED, time_, date, crc,
                                size, size, len(encoded), 0, 0, 0, 0, _ZIP_MODE, offset), encoded]
        offset += zipfile.sizeFileHeader + len(encoded) + size
    directory = b"".join(central)
    end = struct.pack(zipfile.structEndArchive, zipfile.stringEndArchive, 0, 0, len(members),
                      len(members), len(directory), offset, 0)
    return b"".join(local) + directory + end


#: ZipInfo's default stamp (1980-01-01 00:00:00) as MS-DOS (time, date), the system it
#: records as the creator (0: MS-DOS on Windows, 3: Unix elsewhere) and the attributes
#: ``ZipFile.open(..., "w")`` gives a member that has none (a file, ``rw-------``).
_ZIP_STAMP = (0, (0 << 9) | (1 << 5) | 1)
_ZIP_SYSTEM = zipfile.ZipInfo().create_system
_ZIP_MODE = 0o600 << 16


def _zip_name(name: str) -> tuple[bytes, int]:
    """A member's name as zipfile encodes it and the flag bits it sets: ASCII, else UTF-8
    with the language encoding flag (0x800)."""
    try:
        return name.encode("ascii"), 0
    except UnicodeEncodeError:
        return name.encode("utf-8"), 0x800


def decode_state(data: bytes, database: Path, row: str) -> dict[str, np.ndarray]:
    """The bundle :func:`encode_state` wrote (no pickles), read within the row's bytes: each
    member's header is checked before its array is read (:func:`_member_header`), so a row
    declaring 2⁴⁰ elements is refused, not allocated. StoreError naming the ``database`` and
    the ``row`` (in words) when it does not read."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            for member in bundle.infolist():
                shape, dtype, room = _member_header(bundle, member)
                if math.prod(shape) * dtype.itemsize > room:
                    raise ValueError(f"array {member.filename} declares shape {list(shape)} "
                                     f"dtype {dtype.str}, more data than its {room} bytes")
        with np.load(io.BytesIO(data), allow_pickle=False) as bundle:
            return {name: bundle[name] for name in bundle.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise StoreError(database, f"{row} does not read back as arrays ({exc})",
                         "uncompressed .npy arrays of numbers, as the store writes them") from exc


def load_arrays(root: Path, relative: str, recorded: TensorInfo) -> dict[str, np.ndarray]:
    """Read the bundle ``root/relative`` within bounds, check it against its row, return it.

    Nothing is read past what the row records and nothing is allocated before the file's
    array headers agree with the row: the path is walked from ``root`` one component at a time
    without following a symbolic link (``openat`` with ``O_NOFOLLOW``, so a link swapped in
    meanwhile is refused too), the file must be a regular file (``lstat`` before opening, so a
    FIFO or a device is never opened; ``fstat`` of what was opened) of exactly
    ``recorded.nbytes`` bytes, its SHA-256 must match, and every ``.npy`` member must be
    stored uncompressed with the recorded name, dtype and shape, its data within its member.
    Written by hand because :func:`numpy.load` trusts the header it reads: a header declaring
    2⁴⁰ elements is allocated before the data is found missing.

    Raises
    ------
    StoreError
        The path leaves ``root`` or crosses a symbolic link, the file is missing, not a
        regular file, of another size, altered (SHA-256), not an ``.npz`` bundle, or its
        headers differ from the row. The error names the file.
    """
    path = root / relative
    data = _read_bounded(root, relative, recorded.nbytes)
    actual = hashlib.sha256(data).hexdigest()
    if actual != recorded.sha256:
        raise StoreError(path, f"tensor file altered: sha256 {actual[:12]}…",
                         f"sha256 {recorded.sha256[:12]}…")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as bundle:
            _check_members(path, bundle, recorded)
        with np.load(io.BytesIO(data), allow_pickle=False) as bundle:
            return {name: bundle[name] for name in bundle.files}
    except StoreError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise StoreError(path, f"tensor file unreadable ({exc})") from exc


def check_size(root: Path, relative: str, nbytes: int) -> None:
    """Check that ``root/relative`` is a regular file of ``nbytes`` bytes, reached as
    :func:`load_arrays` reaches it, without reading it."""
    os.close(_open_regular(root, relative, nbytes))


def _open_regular(root: Path, relative: str, nbytes: int) -> int:
    """A descriptor of the regular file ``root/relative`` of ``nbytes`` bytes; see
    :func:`load_arrays`."""
    path = root / relative
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or {".", ".."} & set(parts):
        raise StoreError(path, f"tensor path {relative!r} leaves {root}", _REGULAR)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                raise StoreError(path, "tensor file is missing",
                                 "the file the store references") from None
            kind = _kind(mode, last)
            if kind:
                what = "the tensor file" if last else f"{'/'.join(parts[: i + 1])}/"
                raise StoreError(path, f"{what} is {kind}", _REGULAR)
            flags = _FILE_FLAGS if last else _DIR_FLAGS
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
        stat = os.fstat(fd)
        kind = _kind(stat.st_mode, True)
        if kind:  # replaced between the lstat and the open
            raise StoreError(path, f"the tensor file is {kind}", _REGULAR)
        if stat.st_size != nbytes:
            raise StoreError(path, f"tensor file altered: {stat.st_size} bytes",
                             f"{nbytes} bytes, as recorded")
    except OSError as exc:
        os.close(fd)
        raise StoreError(path, f"tensor file is unreadable ({exc.strerror})") from exc
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int, last: bool) -> str | None:
    """What is wrong with a path component of this ``st_mode`` (None: nothing)."""
    what = next((name for test, name in _KINDS if test(mode)), "a special file")
    wanted = "a regular file" if last else "a directory"
    return None if what == wanted else what


def _read_bounded(root: Path, relative: str, nbytes: int) -> bytes:
    """The ``nbytes`` bytes of the regular file ``root/relative``, never more."""
    fd = _open_regular(root, relative, nbytes)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(nbytes)
    except OSError as exc:
        raise StoreError(root / relative, f"tensor file is unreadable ({exc.strerror})") from exc
    finally:
        os.close(fd)
    if len(data) != nbytes:  # shrank after the fstat
        raise StoreError(root / relative, f"tensor file altered: {len(data)} bytes",
                         f"{nbytes} bytes, as recorded")
    return data


def _member_header(
    bundle: zipfile.ZipFile, member: zipfile.ZipInfo
) -> tuple[tuple[int, ...], np.dtype, int]:
    """The shape and dtype one ``.npy`` member declares and the bytes of data it holds, read
    from its header alone: stored uncompressed, ``.npy`` format 1.0 or 2.0, no object dtype;
    ValueError otherwise (naming the member). Reading the array is bounded by the member's
    bytes once the caller has checked the declared size against them."""
    name = member.filename
    if member.compress_type != zipfile.ZIP_STORED or member.file_size != member.compress_size:
        raise ValueError(f"array {name} is compressed")
    with bundle.open(member) as handle:
        version = np.lib.format.read_magic(handle)
        if version not in _HEADER_READERS:
            raise ValueError(f"array {name}: .npy format {version}")
        shape, _, dtype = _HEADER_READERS[version](handle)
        room = member.file_size - handle.tell()
    if dtype.hasobject:
        raise ValueError(f"array {name} declares dtype {dtype.str}")
    return shape, dtype, room


def _check_members(path: Path, bundle: zipfile.ZipFile, recorded: TensorInfo) -> None:
    """Each member's ``.npy`` header (:func:`_member_header`) against the row: uncompressed,
    recorded name, dtype and shape, and the data it declares inside the member (so allocating
    it is bounded by the file's size)."""
    members = bundle.infolist()
    names = [m.filename.removesuffix(".npy") for m in members]
    if names != recorded.names:
        raise StoreError(path, f"tensor file holds arrays {names}",
                         f"arrays {recorded.names}, as recorded")
    total = 0
    for member, shape, dtype in zip(members, recorded.shapes, recorded.dtypes, strict=True):
        try:
            found, kind, room = _member_header(bundle, member)
        except ValueError as exc:
            raise StoreError(path, str(exc), "uncompressed .npy 1.0 or 2.0 arrays of numbers, "
                             "as the store writes them") from None
        declared = f"shape {list(found)} dtype {kind.str}"
        if list(found) != list(shape) or kind.str != dtype:
            raise StoreError(path, f"array {member.filename} declares {declared}",
                             f"shape {list(shape)} dtype {dtype}, as recorded")
        total += math.prod(found) * kind.itemsize
        if total > recorded.nbytes or math.prod(found) * kind.itemsize > room:
            raise StoreError(path, f"array {member.filename} declares {declared}, more data "
                             f"than the file's {recorded.nbytes} bytes hold", "complete arrays")
