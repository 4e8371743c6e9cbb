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
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedpriv.atomic import atomic_write_bytes
from fedpriv.audit.errors import StoreError

__all__ = ["Arrays", "TensorInfo", "load_arrays", "save_arrays"]

#: Arrays accepted by the store: named (kept in order) or a plain sequence (named arr_0, ...).
Arrays = Mapping[str, np.ndarray] | Sequence[np.ndarray]


@dataclass(frozen=True)
class TensorInfo:
    """What the database records about one tensor file."""

    sha256: str
    names: list[str]
    shapes: list[list[int]]
    dtypes: list[str]
    nbytes: int


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


def load_arrays(path: Path, sha256: str) -> dict[str, np.ndarray]:
    """Read a bundle, checking its SHA-256 first.

    Raises
    ------
    StoreError
        The file is missing, its hash differs from ``sha256`` (altered or truncated), or it
        is not a readable ``.npz`` bundle. The error names the file.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise StoreError(path, "tensor file is missing", "the file the store references") from None
    except OSError as exc:
        raise StoreError(path, f"tensor file is unreadable ({exc.strerror})") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise StoreError(
            path, f"tensor file altered: sha256 {actual[:12]}…", f"sha256 {sha256[:12]}…"
        )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as bundle:
            return {name: bundle[name] for name in bundle.files}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise StoreError(path, f"tensor file unreadable ({exc})") from exc
