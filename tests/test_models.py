from pathlib import Path

import pytest
import torch

from fedpriv.errors import InputError
from fedpriv.models import build_model, count_parameters


def test_paper_mlp_has_exactly_13700_parameters_and_no_biases():
    model = build_model("paper-mlp", (1, 16, 16))
    # 256·50 + 50·15 + 15·10, counted independently of the class definition
    assert count_parameters(model) == 256 * 50 + 50 * 15 + 15 * 10 == 13_700
    assert all("bias" not in name for name, _ in model.named_parameters())


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
def test_small_cnn_accepts_28_and_32_pixel_inputs(shape):
    model = build_model("small-cnn", shape)
    assert model(torch.zeros(4, *shape)).shape == (4, 10)


def test_unknown_model_names_the_key():
    with pytest.raises(InputError, match="model.name"):
        build_model("resnet", (1, 16, 16))


def test_standardized_paper_mlp_is_the_paper_mlp_on_standardised_inputs():
    from fedpriv.models.mlp import FMNIST16_MEAN, FMNIST16_STD

    torch.manual_seed(0)
    plain = build_model("paper-mlp", (1, 16, 16))
    std = build_model("paper-mlp-standardized", (1, 16, 16))
    # the same weights: the standardisation adds no parameter and nothing to the state dict
    assert list(std.state_dict()) == list(plain.state_dict())
    assert count_parameters(std) == 13_700
    std.load_state_dict(plain.state_dict())
    x = torch.rand(5, 1, 16, 16, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(std(x), plain((x - FMNIST16_MEAN) / FMNIST16_STD))


def test_standardized_paper_mlp_rejects_a_non_positive_scale():
    from fedpriv.models.mlp import PaperMLP

    with pytest.raises(ValueError, match="input_std"):
        PaperMLP(input_std=0.0)


FMNIST = Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.skipif(not FMNIST.is_dir(), reason="Fashion-MNIST is not installed")
def test_standardisation_constants_are_the_training_images_statistics():
    from fedpriv.data import load_dataset
    from fedpriv.models.mlp import FMNIST16_MEAN, FMNIST16_STD

    x = load_dataset("fashion-mnist", str(FMNIST), False, 0, 0.2).train_x.double()
    assert x.shape == (60_000, 1, 16, 16)
    assert abs(float(x.mean()) - FMNIST16_MEAN) < 1e-5
    assert abs(float(x.std()) - FMNIST16_STD) < 1e-5
