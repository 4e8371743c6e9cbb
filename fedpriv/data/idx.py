"""Read the IDX files of MNIST and Fashion-MNIST as they are distributed: plain or gzipped.

The IDX format (LeCun et al., "The MNIST database", http://yann.lecun.com/exdb/mnist/): two
zero bytes, a type code (``0x08`` = unsigned byte, the only type these sets use), the number
of dimensions ``d``, then ``d`` big-endian 32-bit sizes and the data in row-major order.

Debian's ``dataset-fashion-mnist`` package installs the four files of the original
distribution, gzipped, directly in ``/usr/share/datasets/fashion-mnist/``; torchvision expects
them unzipped in ``ROOT/<ClassName>/raw/``. :func:`find_idx_set` looks for the flat layout
(either compression) so the Debian directory works as ``data.root`` unchanged; the torchvision
layout stays torchvision's to read (:mod:`fedpriv.data.datasets`).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

__all__ = ["IDX_FILES", "find_idx_set", "read_idx"]

IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
"""The four files of an MNIST-format set, by role (uncompressed names)."""

_UBYTE = 0x08


def read_idx(path: Path) -> np.ndarray:
    """The array stored in one IDX file (``.gz`` decompressed on the fly), as uint8.

    Raises
    ------
    ValueError
        The file is not an unsigned-byte IDX file, or its size disagrees with its header.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != _UBYTE:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (header {data[:4].hex()})")
    ndim = data[3]
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = memoryview(data)[4 + 4 * ndim :]
    if len(body) != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"{path}: {len(body)} data bytes for shape {shape}")
    return np.frombuffer(body, dtype=np.uint8).reshape(shape).copy()  # writable, owns its data


def find_idx_set(root: Path) -> dict[str, Path] | None:
    """The four files directly in ``root`` (each plain or ``.gz``, plain preferred), or None
    when any is missing."""
    found = {}
    for role, name in IDX_FILES.items():
        candidates = [root / name, root / f"{name}.gz"]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            return None
        found[role] = path
    return found
