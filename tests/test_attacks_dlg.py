"""DLG and iDLG on tiny cases."""

from __future__ import annotations

import numpy as np
import pytest
from attacks_support import digits, mean_gradient_view

from attacks import run_attack, score_reconstruction


@pytest.mark.parametrize("name", ["dlg", "idlg"])
def test_tiny_case_is_recovered(name):
    x, y = digits([7])
    view = mean_gradient_view(x, y, seed=1)
    result = run_attack(name, view, iterations=50, seed=0)
    score = score_reconstruction(result.reconstructions, x.numpy())
    assert score.mse[0] < 1e-4
    assert result.labels.tolist() == y.tolist()
    assert result.loss < 1e-6
    assert not np.array_equal(result.start, result.reconstructions)


def test_dlg_batch_two_recovers_both_in_some_order():
    x, y = digits([1, 4])
    view = mean_gradient_view(x, y, seed=2)
    result = run_attack("dlg", view, iterations=100, restarts=3, seed=0)
    score = score_reconstruction(
        result.reconstructions, x.numpy(), recovered_labels=result.labels, true_labels=y.numpy()
    )
    assert score.summary()["best_mse"] < 1e-3
    assert score.label_accuracy >= 0.5


def test_dlg_is_deterministic_per_seed():
    x, y = digits([3])
    view = mean_gradient_view(x, y)
    a = run_attack("dlg", view, iterations=5, seed=1)
    b = run_attack("dlg", view, iterations=5, seed=1)
    np.testing.assert_array_equal(a.reconstructions, b.reconstructions)
    assert a.loss == b.loss
