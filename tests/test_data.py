import struct

import numpy as np
import pytest
import torch

from fedpriv.data import iid_partition, load_dataset, partition_indices
from fedpriv.data.datasets import upsample_digits
from fedpriv.errors import InputError


def _write_idx(path, array: np.ndarray) -> None:
    """MNIST's raw IDX format: magic (0, 0, dtype 0x08 = ubyte, ndim), big-endian dims, data."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture()
def tiny_mnist(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in [("train", 12), ("t10k", 5)]:
        images = rng.integers(0, 256, size=(n, 28, 28))
        _write_idx(raw / f"{split}-images-idx3-ubyte", images)
        _write_idx(raw / f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    return tmp_path, images


def test_mnist_is_read_from_raw_idx_files_and_centre_cropped_to_16(tiny_mnist):
    root, last_images = tiny_mnist
    load_dataset.cache_clear()
    ds = load_dataset("mnist", str(root))
    assert ds.train_x.shape == (12, 1, 16, 16) and ds.test_x.shape == (5, 1, 16, 16)
    assert ds.train_y.tolist() == [i % 10 for i in range(12)]
    expected = torch.as_tensor(last_images[:, 6:22, 6:22] / 255.0, dtype=torch.float32)
    torch.testing.assert_close(ds.test_x[:, 0], expected)


def test_missing_data_set_names_the_root_and_how_to_get_it(tmp_path):
    load_dataset.cache_clear()
    with pytest.raises(InputError) as err:
        load_dataset("fashion-mnist", str(tmp_path / "nowhere"))
    assert "data.root" in str(err.value) and "data.download" in str(err.value)


def test_digits_offline_default_is_16x16_in_unit_range_with_held_out_test_split():
    ds = load_dataset("digits")
    assert ds.input_shape == (1, 16, 16)
    assert len(ds.train_y) + len(ds.test_y) == 1797
    assert 0.0 <= float(ds.train_x.min()) and float(ds.train_x.max()) <= 1.0
    # the upsampling preserves the mean intensity of each 8×8 image (bilinear, half-pixel)
    from sklearn.datasets import load_digits

    images = load_digits().images[:20]
    up = upsample_digits(images)
    expected = images.mean(axis=(1, 2)) / 16
    np.testing.assert_allclose(up.mean(dim=(1, 2, 3)).numpy(), expected, atol=0.02)


def test_iid_partition_is_a_deterministic_cover():
    parts = iid_partition(103, 10, seed=3)
    assert sorted(np.concatenate(parts).tolist()) == list(range(103))
    assert [p.tolist() for p in parts] == [p.tolist() for p in iid_partition(103, 10, seed=3)]


def test_dirichlet_small_alpha_skews_labels_more_than_large_alpha():
    labels = np.repeat(np.arange(10), 100)

    def mean_classes(alpha):
        parts = partition_indices(labels, 10, "dirichlet", alpha, seed=0)
        assert sorted(np.concatenate(parts).tolist()) == list(range(1000))
        return np.mean([len(np.unique(labels[p])) for p in parts])

    assert mean_classes(0.05) < mean_classes(100.0)
    assert mean_classes(100.0) == 10


def test_too_many_clients_is_refused():
    with pytest.raises(InputError, match="data.num_clients"):
        partition_indices(np.arange(5), 6, "iid", 0.5, 0)


def test_shapes_are_those_loaded() -> None:
    """The shapes an offline audit uses without reading data match what loading gives."""
    from fedpriv.data import SHAPES, load_dataset

    digits = load_dataset("digits")
    assert SHAPES["digits"] == (digits.input_shape, digits.num_classes)
