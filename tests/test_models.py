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
