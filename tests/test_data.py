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


def _write_flat_set(root, gz: bool, n_train: int = 12, n_test: int = 5):
    """The original distribution's flat layout (as Debian installs it): four IDX files in
    ``root``, gzipped when ``gz``."""
    import gzip

    rng = np.random.default_rng(1)
    arrays = {}
    for split, n in [("train", n_train), ("t10k", n_test)]:
        arrays[f"{split}-images-idx3-ubyte"] = rng.integers(0, 256, size=(n, 28, 28))
        arrays[f"{split}-labels-idx1-ubyte"] = (np.arange(n) * 7) % 10
    for name, array in arrays.items():
        plain = root / name
        _write_idx(plain, array)
        if gz:
            (root / f"{name}.gz").write_bytes(gzip.compress(plain.read_bytes()))
            plain.unlink()
    return arrays


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_reads_the_flat_debian_layout_and_resizes_to_16(tmp_path, gz):
    arrays = _write_flat_set(tmp_path, gz)
    load_dataset.cache_clear()
    ds = load_dataset("fashion-mnist", str(tmp_path))
    assert ds.train_x.shape == (12, 1, 16, 16) and ds.test_x.shape == (5, 1, 16, 16)
    assert ds.train_y.tolist() == arrays["train-labels-idx1-ubyte"].tolist()
    assert ds.num_classes == 10
    # independent route: torchvision's functional resize (bilinear, no antialias) of the raw pixels
    from torchvision.transforms.functional import InterpolationMode, resize

    raw = torch.as_tensor(arrays["t10k-images-idx3-ubyte"] / 255.0, dtype=torch.float32)
    expected = resize(raw.unsqueeze(1), [16, 16], InterpolationMode.BILINEAR, antialias=False)
    torch.testing.assert_close(ds.test_x, expected.clamp(0, 1))


def test_flat_mnist_is_centre_cropped_like_the_torchvision_layout(tmp_path):
    arrays = _write_flat_set(tmp_path, gz=True)
    load_dataset.cache_clear()
    ds = load_dataset("mnist", str(tmp_path))
    expected = arrays["train-images-idx3-ubyte"][:, 6:22, 6:22] / 255.0
    torch.testing.assert_close(ds.train_x[:, 0], torch.as_tensor(expected, dtype=torch.float32))


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-3],  # truncated data
        lambda b: b"\x00\x00\x0d" + b[3:],  # float type code, not unsigned byte
        lambda b: b"\x01" + b[1:],  # not an IDX magic number
    ],
)
def test_a_damaged_idx_file_is_refused_naming_the_root(tmp_path, damage):
    _write_flat_set(tmp_path, gz=False)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(damage(path.read_bytes()))
    load_dataset.cache_clear()
    with pytest.raises(InputError) as err:
        load_dataset("fashion-mnist", str(tmp_path))
    assert err.value.key == "data.root" and "IDX" in err.value.allowed


def test_labels_that_do_not_pair_with_images_are_refused(tmp_path):
    _write_flat_set(tmp_path, gz=False)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.arange(4) % 10)  # 5 images, 4 labels
    load_dataset.cache_clear()
    with pytest.raises(InputError, match="pair up"):
        load_dataset("fashion-mnist", str(tmp_path))


def test_missing_fashion_mnist_names_the_debian_package(tmp_path):
    load_dataset.cache_clear()
    with pytest.raises(InputError) as err:
        load_dataset("fashion-mnist", str(tmp_path))
    assert "apt-get install dataset-fashion-mnist" in err.value.allowed


DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


@pytest.mark.slow
@pytest.mark.skipif(
    not __import__("os").path.isfile(f"{DEBIAN_FASHION_MNIST}/train-images-idx3-ubyte.gz"),
    reason="Debian's dataset-fashion-mnist is not installed "
           "(apt-get install dataset-fashion-mnist)",
)
def test_the_real_debian_fashion_mnist_files():
    load_dataset.cache_clear()
    ds = load_dataset("fashion-mnist", DEBIAN_FASHION_MNIST)
    assert ds.train_x.shape == (60_000, 1, 16, 16) and ds.test_x.shape == (10_000, 1, 16, 16)
    # the published class balance: 6,000 training and 1,000 test images per class
    assert torch.bincount(ds.train_y).tolist() == [6000] * 10
    assert torch.bincount(ds.test_y).tolist() == [1000] * 10
    assert 0.0 <= float(ds.train_x.min()) and float(ds.train_x.max()) <= 1.0
    assert 0.2 < float(ds.train_x.mean()) < 0.4  # mean pixel of Fashion-MNIST is 0.286


def test_shapes_are_those_loaded() -> None:
    """The shapes an offline audit uses without reading data match what loading gives."""
    from fedpriv.data import SHAPES, load_dataset

    digits = load_dataset("digits")
    assert SHAPES["digits"] == (digits.input_shape, digits.num_classes)
