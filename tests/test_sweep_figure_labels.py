"""The batch-size figure names each line (σ, κ or the target ε) at its right end, and names
that would overlap are moved apart."""

from __future__ import annotations

from matplotlib.figure import Figure

from workflows.sweep.figures import _name_line_ends, line_name


def test_a_line_is_named_by_its_parameter_or_its_target():
    assert line_name("noise_multiplier", 1.23, None) == "σ 1.23"
    assert line_name("kappa", 75.0, None) == "κ 75"
    assert line_name("laplace_scale", 0.5, None) == "b 0.5"
    assert line_name("noise_multiplier", 0.7, 5.0) == "ε 5"  # calibrated: the target says it
    assert line_name(None, None, None) == ""  # a baseline: its colour and legend say it


def test_names_of_nearby_line_ends_do_not_overlap():
    ax = Figure().subplots()
    ax.set_ylim(0.0, 1.0)
    ends = [(0.50, 128, "κ 250", "g"), (0.49, 128, "κ 200", "g"), (0.80, 128, "σ 0.2", "b")]
    _name_line_ends(ax, ends)
    placed = {t.get_text(): t.xyann[1] for t in ax.texts}
    assert placed["κ 200"] == 0.49 and placed["σ 0.2"] == 0.80  # already clear: where it ends
    assert placed["κ 250"] >= 0.49 + 0.03 - 1e-12  # nudged up by the minimum gap
    assert {t.xy for t in ax.texts} == {(128, 0.50), (128, 0.49), (128, 0.80)}
