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


def test_the_analytic_start_is_solved_once_for_every_restart_when_the_labels_are_known(
        monkeypatch):  # noqa: ANN001
    """With labels known before the restarts the analytic solution is the same for each: it
    is solved once, and every restart starts from its own copy of it (the optimiser moves the
    images in place)."""
    import attacks.inversion.analytic as analytic
    from attacks.inversion.matching import analytic_images

    x, y = digits([3, 5])
    view = mean_gradient_view(x, y)
    calls: list[int] = []
    solve = analytic.analytic_images

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return solve(*args, **kwargs)

    monkeypatch.setattr(analytic, "analytic_images", counted)
    starts: list[torch.Tensor] = []
    snapshots: list[torch.Tensor] = []

    def recorded(problem, n, gen, labels):  # noqa: ANN001, ANN202
        starts.append(analytic_images(problem, n, gen, labels))
        snapshots.append(starts[-1].detach().clone())  # as it was before the optimiser ran
        return starts[-1]

    matcher = GradientMatcher(cosine_distance, KnownLabels(y), SignedAdam(lr=0.1),
                              initialise=recorded)
    matcher.run(view, iterations=3, restarts=3, num_images=2,
                generator=torch.Generator().manual_seed(0), device=torch.device("cpu"))
    assert len(calls) == 1 and len(starts) == 3
    # each restart started where the first did, though the first's images moved
    assert all(torch.equal(snapshots[0], later) for later in snapshots[1:])
    assert not torch.equal(starts[0], snapshots[0])
