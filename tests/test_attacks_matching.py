"""The gradient matcher composes its parts: a new attack is a new combination of them."""

from __future__ import annotations

import torch
from attacks_support import digits, mean_gradient_view

from attacks import score_reconstruction
from attacks.inversion.matching import GradientMatcher, KnownLabels
from attacks.inversion.objective import TotalVariation, cosine_distance, l2_distance
from attacks.inversion.optimisers import LBFGS, SignedAdam


def _run(matcher: GradientMatcher, view, iterations: int):  # noqa: ANN001, ANN202
    return matcher.run(view, iterations=iterations, restarts=1, num_images=1,
                       generator=torch.Generator().manual_seed(0), device=torch.device("cpu"))


def test_known_labels_with_lbfgs_recover_the_image():
    x, y = digits([7])
    view = mean_gradient_view(x, y, seed=1)
    matcher = GradientMatcher(l2_distance, KnownLabels(y), LBFGS())
    trial = _run(matcher, view, 50)
    assert score_reconstruction(trial.reconstructions, x.numpy()).mse[0] < 1e-4
    assert trial.labels.tolist() == y.tolist()


def test_boxed_keeps_every_iterate_in_the_data_range():
    x, y = digits([3])
    view = mean_gradient_view(x, y)
    seen: list[tuple[float, float]] = []

    def spy(images: torch.Tensor) -> torch.Tensor:
        seen.append((float(images.detach().min()), float(images.detach().max())))
        return 0.0 * images.sum()

    matcher = GradientMatcher(
        cosine_distance, KnownLabels(y), SignedAdam(lr=0.5), (TotalVariation(0.2), spy), boxed=True
    )
    _run(matcher, view, 5)
    low, high = view.data_range
    assert len(seen) == 5 and all(low <= a and b <= high for a, b in seen)
