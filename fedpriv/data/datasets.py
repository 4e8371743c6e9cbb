"""Load a data set by name into memory as float tensors in [0, 1].

* ``digits`` — scikit-learn's bundled 1,797 8×8 digits (offline), scaled from [0, 16] to
  [0, 1] and bilinearly upsampled to 16×16; a seeded stratified split holds out the server's
  test set (``data.test_fraction``).
* ``mnist`` (centre-cropped to 16×16), ``fashion-mnist`` (resized to 16×16), ``cifar10``
  (32×32 RGB) — from ``data.root``, with the official train/test split. For MNIST and
  Fashion-MNIST ``data.root`` may hold the four IDX files of the original distribution
  directly, plain or gzipped — Debian's ``dataset-fashion-mnist`` package puts them in
  ``/usr/share/datasets/fashion-mnist/`` (:mod:`fedpriv.data.idx`) — or torchvision's layout
  (``ROOT/FashionMNIST/raw/``), which torchvision reads. Nothing is downloaded unless
  ``data.download = true``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from fedpriv.data.idx import find_idx_set, read_idx
from fedpriv.errors import InputError

__all__ = ["DATASETS", "SHAPES", "Dataset", "load_dataset", "scikit_digits"]


@dataclass(frozen=True)
class Dataset:
    """Train and held-out test tensors: images ``(N, C, H, W)`` float32 in [0, 1], labels int64."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one example: ``(channels, height, width)`` for images."""
        return tuple(int(d) for d in self.train_x.shape[1:])


def upsample_digits(images: np.ndarray) -> torch.Tensor:
    """scikit-learn digits ``(N, 8, 8)`` in [0, 16] → ``(N, 1, 16, 16)`` float32 in [0, 1]."""
    x = torch.as_tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = F.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False)
    return x.clamp_(0.0, 1.0)


def scikit_digits(
    indices: Sequence[int] | slice = slice(None),
) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's digits at ``indices`` of its bundled order (no split), upsampled
    (:func:`upsample_digits`), and their labels (int64): the whole set for ``digits``, fixed
    records for the benchmarks."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    labels = torch.as_tensor(bunch.target[indices], dtype=torch.int64)
    return upsample_digits(bunch.images[indices]), labels


def _digits(root: str, download: bool, seed: int, test_fraction: float) -> Dataset:
    from sklearn.model_selection import train_test_split

    x, y = scikit_digits()
    idx = np.arange(len(y))
    train_idx, test_idx = train_test_split(
        idx, test_size=_test_count(test_fraction, len(idx), 10), random_state=seed,
        stratify=y.numpy(),
    )
    return Dataset("digits", x[train_idx], y[train_idx], x[test_idx], y[test_idx], 10)


def _test_count(test_fraction: float, n: int, classes: int) -> int:
    """The test set's size, ``⌈f·n⌉`` as scikit-learn rounds a fraction, if a stratified split
    can hold it: at least as many records as classes on each side (scikit-learn's
    ``StratifiedShuffleSplit`` refuses fewer, with a ValueError).

    Raises
    ------
    InputError
        Key ``data.test_fraction``, naming the fractions that work for ``n`` records.
    """
    count = math.ceil(test_fraction * n)
    if not classes <= count <= n - classes:
        raise InputError(
            "data.test_fraction", test_fraction,
            f"a fraction leaving at least {classes} test and {classes} train records of the "
            f"{n:,} (the stratified split needs one per class on each side): in "
            f"[{classes / n:.4g}, "
            f"{math.floor((n - classes) / n * 1e4) / 1e4:.4g}]",
        )
    return count


_APT_HINT = {
    "FashionMNIST": "; on Debian or Ubuntu `apt-get install dataset-fashion-mnist` and set "
                    "data.root = \"/usr/share/datasets/fashion-mnist\"",
}


def _missing(name: str, root: str, exc: Exception) -> InputError:
    return InputError(
        "data.root",
        root,
        f"a directory holding the four {name} IDX files (plain or .gz), or torchvision's "
        f"{name}/raw/ layout ({exc}){_APT_HINT.get(name, '')}; or set data.download = true "
        f"(--set data.download=true) on a machine with internet",
    )


def _idx_set(
    cls_name: str, transform: Callable[[torch.Tensor], torch.Tensor]
) -> Callable[[str, bool, int, float], Dataset]:
    """An MNIST-format set: the IDX files directly in ``root`` (the original distribution's
    layout, as Debian installs it), else torchvision's layout through torchvision."""
    through_torchvision = _torchvision_set(cls_name, transform)

    def load(root: str, download: bool, seed: int, test_fraction: float) -> Dataset:
        files = find_idx_set(Path(root))
        if files is None:
            return through_torchvision(root, download, seed, test_fraction)
        try:
            arrays = {role: read_idx(path) for role, path in files.items()}
            _check_idx_set(arrays)
        except (OSError, ValueError, EOFError) as exc:
            raise _missing(cls_name, root, exc) from None
        return Dataset(
            cls_name.lower(),
            transform(_images(arrays["train_images"])),
            torch.as_tensor(arrays["train_labels"], dtype=torch.int64),
            transform(_images(arrays["test_images"])),
            torch.as_tensor(arrays["test_labels"], dtype=torch.int64),
            10,
        )

    return load


def _check_idx_set(arrays: dict[str, np.ndarray]) -> None:
    """One label per image, images ``(N, H, W)``."""
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"{split}: images {images.shape} and labels {labels.shape} do not "
                             "pair up as (N, H, W) and (N,)")


def _torchvision_set(
    cls_name: str, transform: Callable[[torch.Tensor], torch.Tensor]
) -> Callable[[str, bool, int, float], Dataset]:
    def load(root: str, download: bool, seed: int, test_fraction: float) -> Dataset:
        import torchvision

        cls = getattr(torchvision.datasets, cls_name)
        try:
            train = cls(root=root, train=True, download=download)
            test = cls(root=root, train=False, download=download)
        except RuntimeError as exc:  # torchvision: "Dataset not found. You can use download=True"
            raise _missing(cls_name, root, exc) from None
        return Dataset(
            cls_name.lower(),
            transform(_images(train.data)),
            torch.as_tensor(np.asarray(train.targets), dtype=torch.int64),
            transform(_images(test.data)),
            torch.as_tensor(np.asarray(test.targets), dtype=torch.int64),
            len(train.classes),
        )

    return load


def _images(data: torch.Tensor | np.ndarray) -> torch.Tensor:
    """uint8 ``(N, H, W)`` or ``(N, H, W, C)`` → float32 ``(N, C, H, W)`` in [0, 1]."""
    x = torch.as_tensor(np.asarray(data), dtype=torch.float32) / 255.0
    return x.unsqueeze(1) if x.ndim == 3 else x.permute(0, 3, 1, 2).contiguous()


def _centre_crop_16(x: torch.Tensor) -> torch.Tensor:
    h, w = x.shape[-2:]
    top, left = (h - 16) // 2, (w - 16) // 2
    return x[..., top : top + 16, left : left + 16].contiguous()


def _resize_16(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False).clamp_(0, 1)


DATASETS: dict[str, Callable[[str, bool, int, float], Dataset]] = {
    "digits": _digits,
    "mnist": _idx_set("MNIST", _centre_crop_16),
    "fashion-mnist": _idx_set("FashionMNIST", _resize_16),
    "cifar10": _torchvision_set("CIFAR10", lambda x: x),
}


SHAPES: dict[str, tuple[tuple[int, int, int], int]] = {
    "digits": ((1, 16, 16), 10),
    "mnist": ((1, 16, 16), 10),
    "fashion-mnist": ((1, 16, 16), 10),
    "cifar10": ((3, 32, 32), 10),
}
"""Each data set's ``(input shape, number of classes)`` as loaded here, known without reading a
file: an offline audit of a foreign store builds its model from these and never touches the
store's ``data.root`` (tested against :func:`load_dataset`)."""


@lru_cache(maxsize=4)
def load_dataset(
    name: str, root: str = "data", download: bool = False, seed: int = 0, test_fraction: float = 0.2
) -> Dataset:
    """Load data set ``name`` (cached per process).

    Raises
    ------
    InputError
        Unknown name (key ``data.name``) or files missing under ``root`` (key ``data.root``).
    """
    try:
        loader = DATASETS[name]
    except KeyError:
        raise InputError("data.name", name, f"one of {sorted(DATASETS)}") from None
    return loader(str(Path(root).expanduser()), download, seed, test_fraction)
