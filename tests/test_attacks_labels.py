"""Analytic label recovery (iDLG sign rule; batch counts from row sums)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from attacks_support import digits, mean_gradient_view

from attacks import ServerView, label_accuracy, recover_labels, simulate_view
from attacks.labels import allocate_counts
from fedpriv.models import build_model


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("seed", range(5))
def test_single_example_label_is_always_recovered(seed):
    for index in range(seed * 7, seed * 7 + 4):
        x, y = digits([index])
        view = mean_gradient_view(x, y, seed=seed)
        assert recover_labels(view, 1, _gen(seed)).tolist() == y.tolist()


@pytest.mark.parametrize("seed", range(4))
def test_batch_of_four_distinct_labels(seed):
    x, y = digits([seed, seed + 11, seed + 23, seed + 35])
    assert len(set(y.tolist())) == 4
    view = mean_gradient_view(x, y, seed=seed)
    assert label_accuracy(recover_labels(view, 4, _gen(seed)), y.numpy()) >= 0.75


def test_batch_with_repeated_labels_counts_duplicates():
    rng = np.random.default_rng(3)
    from sklearn.datasets import load_digits

    target = load_digits().target
    accuracies = []
    for seed in range(5):
        chosen = [3, 3, 3, 1, 1, 7, 7, 0]
        index = [int(rng.choice(np.flatnonzero(target == c))) for c in chosen]
        x, y = digits(index)
        view = mean_gradient_view(x, y, seed=seed)
        accuracies.append(label_accuracy(recover_labels(view, 8, _gen(seed)), y.numpy()))
    assert np.mean(accuracies) >= 0.9


def test_bias_rule_on_small_cnn():
    """With a bias in the last layer the bias gradient carries the labels (a = 1)."""
    x = torch.rand((1, 1, 28, 28), generator=_gen(0))
    for label in (0, 4, 9):
        model = build_model("small-cnn", (1, 28, 28), 10)
        theta = [p.detach().numpy().copy() for p in model.parameters()]
        loss = F.cross_entropy(model(x), torch.tensor([label]))
        grads = torch.autograd.grad(loss, list(model.parameters()))
        view = ServerView(
            "small-cnn", (1, 28, 28), 10, theta, [-g.numpy() for g in grads], 1.0, 1.0
        )
        assert recover_labels(view, 1, _gen(1)).tolist() == [label]


def test_allocate_counts_presence_then_largest_remainder():
    row_sums = np.array([-0.3, 0.2, -0.1, 0.4, -0.2])
    estimates = np.array([2.6, 0.1, 1.2, 0.0, 1.1])
    counts = allocate_counts(row_sums, estimates, 5)
    assert counts.sum() == 5
    assert counts.tolist() == [3, 0, 1, 0, 1]
    # more negative rows than slots: the most negative win
    assert allocate_counts(row_sums, estimates, 2).tolist() == [1, 0, 0, 0, 1]
    # no negative row (noise): estimates decide
    assert allocate_counts(np.ones(5), estimates, 3).tolist() == [2, 0, 1, 0, 0]


def test_counts_of_a_clipped_batch_model_the_clip_factors():
    """Clipping (C = 1 halves every example's gradient at this θ) no longer shrinks the row
    sums the counts are read from: at batch 128 the counts are off by 2 (18 without the clip
    factors, which made IGA's reconstructions collapse onto one pattern)."""
    x, y = digits(list(range(128)))
    view = simulate_view("paper-mlp", x, y, mechanism="clip", mechanism_params={"clip": 1.0})
    found = recover_labels(view, 128, torch.Generator().manual_seed(0))
    error = np.abs(np.bincount(found, minlength=10) - np.bincount(y.numpy(), minlength=10)).sum()
    assert error <= 4
